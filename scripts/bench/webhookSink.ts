import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type postgres from "postgres";
import { Webhook } from "standardwebhooks";
import { addOperatorEndpoint } from "../../api/webhooks/webhookEndpoints.ts";
import { percentile } from "./benchStack.ts";

/**
 * A webhook receiver for the payout benchmark (BENCH_WEBHOOKS=1, `npm run bench:webhooks`):
 * registered as an operator's endpoint for every event, it verifies each delivery with the
 * `standardwebhooks` package as an integrator would and notes when it arrived. The figures: from
 * a claim's completion (its `completed_at`, the completing transaction's time) to the arrival of
 * its `claim.completed` webhook, and the deliveries a second while the payouts run.
 */
export async function startWebhookSink(sql: postgres.Sql) {
  const arrivals: { at: number; type: string; claimId: string | null }[] = [];
  let rejected = 0;
  let secret = "";
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = Date.now();
      try {
        const headers = Object.fromEntries(
          Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
        );
        const event = new Webhook(secret).verify(Buffer.concat(chunks), headers) as {
          type: string;
          data: { claim_id?: string };
        };
        arrivals.push({ at, type: event.type, claimId: event.data.claim_id ?? null });
        response.writeHead(204).end();
      } catch {
        rejected += 1;
        response.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  secret = (
    await addOperatorEndpoint(sql as never, { url, eventTypes: [], description: "benchmark" })
  ).secret;

  return {
    /** Figures for the claims given (those of one phase), once their webhooks arrived. */
    async figures(claimIds: string[], window: { from: number; to: number }) {
      const completedAt = new Map(
        (
          await sql<{ id: string; completed_ms: number }[]>`
            select id, (extract(epoch from completed_at) * 1000)::float8 as completed_ms
            from app.claims where id = any(${claimIds}) and completed_at is not null`
        ).map((row) => [row.id, row.completed_ms]),
      );
      const latencies = arrivals
        .filter((arrival) => arrival.type === "claim.completed" && arrival.claimId)
        .flatMap((arrival) => {
          const completed = completedAt.get(arrival.claimId as string);
          return completed === undefined ? [] : [(arrival.at - completed) / 1000];
        });
      const inWindow = arrivals.filter(
        (arrival) => arrival.at >= window.from && arrival.at <= window.to,
      );
      const perSecond = new Map<number, number>();
      for (const arrival of inWindow) {
        const second = Math.floor(arrival.at / 1000);
        perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
      }
      const seconds = Math.max(0.001, (window.to - window.from) / 1000);
      return {
        completedWebhooks: latencies.length,
        completionToWebhookP50: percentile(latencies, 50),
        completionToWebhookP95: percentile(latencies, 95),
        deliveries: inWindow.length,
        deliveriesPerSecond: inWindow.length / seconds,
        peakDeliveriesPerSecond: Math.max(0, ...perSecond.values()),
        rejected,
      };
    },
    /** Waits until `count` claim.completed webhooks of these claims arrived (or `timeoutMs`). */
    async untilCompletedWebhooks(claimIds: string[], timeoutMs: number) {
      const wanted = new Set(claimIds);
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const got = new Set(
          arrivals
            .filter(
              (arrival) => arrival.type === "claim.completed" && wanted.has(arrival.claimId ?? ""),
            )
            .map((arrival) => arrival.claimId),
        );
        if (got.size >= wanted.size) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type WebhookSink = Awaited<ReturnType<typeof startWebhookSink>>;
