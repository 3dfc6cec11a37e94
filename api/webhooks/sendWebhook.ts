import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { Webhook } from "standardwebhooks";
import type { WebhookConfig } from "../config/webhookSettings.ts";
import {
  guardedLookup,
  type Resolve,
  reachesLoopbackOnly,
  refusedWebhookUrl,
} from "./publicAddress.ts";

/** One delivery attempt as it goes out. */
export interface OutgoingWebhook {
  url: string;
  /** Standard Webhooks secret: `whsec_` and base64. */
  secret: string;
  /**
   * `secret`: a Standard Webhooks signature with the endpoint's secret (operators' endpoints,
   * claims' webhook_url). `service`: the service's EIP-191 signature instead, for a receiver
   * that holds no secret of ours (A2A push configs, whose token travels in a header).
   */
  signedBy?: "secret" | "service";
  /** The event's id: `webhook-id`, the same on every attempt, for the receiver to deduplicate. */
  messageId: string;
  body: string;
  /** The body's media type: application/json unless the protocol says (A2A's a2a+json). */
  contentType?: string;
  /** This delivery's attempt, 1 for the first. */
  attempt: number;
  /** Sent before (an attempt whose outcome a crash may have lost) or again by an operator. */
  redelivery: boolean;
  /** Headers of the protocol (A2A's X-A2A-Notification-Token, Authorization). */
  extraHeaders?: Record<string, string>;
  /** Gives the attempt up (the worker stopping): the connection is closed, a failure comes back. */
  signal?: AbortSignal;
}

export type WebhookOutcome =
  | { ok: true; status: number }
  | { ok: false; status: number | null; error: string };

/** Signs as the service: the receipts' key (EIP-191), the `receipt_signer` of the offer. */
export interface ServiceSigner {
  signMessage(args: { message: string }): Promise<`0x${string}`>;
}

/**
 * What the service's EIP-191 signature covers: the webhook-id, the webhook-timestamp and the
 * body, as Standard Webhooks signs them (docs/events.md#a2a-push-notifications).
 */
export function serviceSignedContent(id: string, timestamp: string, body: string): string {
  return `${id}.${timestamp}.${body}`;
}

export interface WebhookTransport {
  send(webhook: OutgoingWebhook): Promise<WebhookOutcome>;
}

/**
 * Posts signed webhooks (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature`, signed with the `standardwebhooks` package, so integrators verify with it
 * in any language), and only to public addresses over https on 443 (plain http and other ports
 * to loopback alone, where allowed), checked when the socket connects
 * (docs/events.md#no-ssrf). A redirect is not followed (a failure); the answer is read up to
 * WEBHOOK_MAX_RESPONSE_BYTES and the whole exchange bounded by WEBHOOK_TIMEOUT_MS. A fresh
 * connection each time: each is checked as it opens.
 */
export function webhookTransport(
  config: Pick<WebhookConfig, "allowLoopback" | "timeoutMs" | "maxResponseBytes">,
  resolve: Resolve,
  serviceSigner?: ServiceSigner,
): WebhookTransport {
  const lookup = guardedLookup(resolve, config.allowLoopback);
  const loopbackLookup = guardedLookup(resolve, config.allowLoopback, true);
  return {
    async send(webhook) {
      let url: URL;
      try {
        url = new URL(webhook.url);
      } catch {
        return { ok: false, status: null, error: "not a URL" };
      }
      const refused = refusedWebhookUrl(url, config.allowLoopback);
      if (refused) return { ok: false, status: null, error: refused };
      const timestamp = new Date();
      const seconds = String(Math.floor(timestamp.getTime() / 1000));
      let signatureHeaders: Record<string, string>;
      if (webhook.signedBy === "service") {
        if (!serviceSigner) return { ok: false, status: null, error: "no service signer" };
        signatureHeaders = {
          "pay-and-earn-signature": await serviceSigner.signMessage({
            message: serviceSignedContent(webhook.messageId, seconds, webhook.body),
          }),
        };
      } else {
        signatureHeaders = {
          "webhook-signature": new Webhook(webhook.secret).sign(
            webhook.messageId,
            timestamp,
            webhook.body,
          ),
        };
      }
      const request = url.protocol === "https:" ? httpsRequest : httpRequest;
      return new Promise<WebhookOutcome>((resolveOutcome) => {
        let settled = false;
        const settle = (outcome: WebhookOutcome) => {
          if (settled) return;
          settled = true;
          clearTimeout(deadline);
          resolveOutcome(outcome);
        };
        const outgoing = request(
          url,
          {
            method: "POST",
            lookup: reachesLoopbackOnly(url) ? loopbackLookup : lookup,
            agent: false,
            signal: webhook.signal,
            headers: {
              "content-type": webhook.contentType ?? "application/json",
              "content-length": Buffer.byteLength(webhook.body),
              "user-agent": "pay-and-earn-webhooks",
              "webhook-id": webhook.messageId,
              "webhook-timestamp": seconds,
              ...signatureHeaders,
              "pay-and-earn-delivery-attempt": String(webhook.attempt),
              ...(webhook.redelivery ? { "pay-and-earn-redelivery": "true" } : {}),
              ...webhook.extraHeaders,
            },
          },
          (response) => {
            const status = response.statusCode ?? 0;
            let bytes = 0;
            response.on("data", (chunk: Buffer) => {
              bytes += chunk.length;
              // The status is what counts; a receiver that answers without end is cut off.
              if (bytes > config.maxResponseBytes) {
                response.destroy();
                finish();
              }
            });
            const finish = () => {
              outgoing.destroy();
              if (status >= 200 && status < 300) settle({ ok: true, status });
              else
                settle({
                  ok: false,
                  status,
                  error:
                    status >= 300 && status < 400
                      ? `redirect (${status}) not followed`
                      : `answered ${status}`,
                });
            };
            response.on("end", finish);
            response.on("error", finish);
            response.on("close", finish);
          },
        );
        const deadline = setTimeout(() => {
          outgoing.destroy();
          settle({ ok: false, status: null, error: `no answer within ${config.timeoutMs} ms` });
        }, config.timeoutMs);
        outgoing.on("error", (error: NodeJS.ErrnoException) => {
          settle({ ok: false, status: null, error: error.message });
        });
        outgoing.end(webhook.body);
      });
    },
  };
}
