import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

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
    request.on("end", () => {
      requests += 1;
      const body = Buffer.concat(chunks).toString("utf8");
      const headers = Object.fromEntries(
        Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
      );
      const payload = secrets
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

export type WebhookReceiver = Awaited<ReturnType<typeof startWebhookReceiver>>;
