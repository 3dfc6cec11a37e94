import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { type Address, verifyMessage } from "viem";
import { serviceSignedContent } from "../../api/webhooks/sendWebhook.ts";

export interface ReceivedWebhook {
  id: string;
  attempt: number;
  redelivery: boolean;
  /** The request's headers, lower-case names. */
  headers: Record<string, string>;
  /** The body, verified with the endpoint's secret by the `standardwebhooks` package. */
  payload: { id: string; type: string; time: string; data: Record<string, unknown> };
}

/**
 * A webhook receiver as an integrator writes one: a real HTTP server that verifies every
 * request's signature with the official `standardwebhooks` package and keeps what verified.
 * `answer` decides each response (a status, or a handler of its own: hang, redirect, flood);
 * requests that fail verification are answered 400 and counted in `rejected`.
 */
export async function startWebhookReceiver(
  options: {
    secrets?: string[];
    /**
     * Verify the service's EIP-191 signature (`pay-and-earn-signature`) by this signer instead of
     * a Standard Webhooks secret, as an A2A client does with the offer's receipt_signer.
     */
    serviceSigner?: Address;
    answer?: (
      request: IncomingMessage,
      response: ServerResponse,
      nth: number,
    ) => number | "handled";
  } = {},
) {
  const received: ReceivedWebhook[] = [];
  let rejected = 0;
  let requests = 0;
  const secrets = options.secrets ?? [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", async () => {
      requests += 1;
      const body = Buffer.concat(chunks).toString("utf8");
      const headers = Object.fromEntries(
        Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
      );
      const payload = options.serviceSigner
        ? await verifiedByService(options.serviceSigner, body, headers)
        : secrets
            .map((secret) => {
              try {
                return new Webhook(secret).verify(body, headers) as ReceivedWebhook["payload"];
              } catch {
                return undefined;
              }
            })
            .find((verified) => verified !== undefined);
      const decided = options.answer?.(request, response, requests) ?? 200;
      if (decided === "handled") return;
      if (!payload) {
        rejected += 1;
        response.writeHead(400).end();
        return;
      }
      if (decided >= 200 && decided < 300) {
        received.push({
          id: headers["webhook-id"] ?? "",
          attempt: Number(headers["pay-and-earn-delivery-attempt"]),
          redelivery: headers["pay-and-earn-redelivery"] === "true",
          headers,
          payload,
        });
      }
      response.writeHead(decided).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    secrets,
    rejected: () => rejected,
    requests: () => requests,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The body, if the service signed it (and only it: no Standard Webhooks signature with it). */
async function verifiedByService(
  signer: Address,
  body: string,
  headers: Record<string, string>,
): Promise<ReceivedWebhook["payload"] | undefined> {
  const signature = headers["pay-and-earn-signature"];
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  if (!signature?.startsWith("0x") || !id || !timestamp || headers["webhook-signature"]) {
    return undefined;
  }
  const message = serviceSignedContent(id, timestamp, body);
  const valid = await verifyMessage({
    address: signer,
    message,
    signature: signature as `0x${string}`,
  }).catch(() => false);
  return valid ? (JSON.parse(body) as ReceivedWebhook["payload"]) : undefined;
}

export type WebhookReceiver = Awaited<ReturnType<typeof startWebhookReceiver>>;
