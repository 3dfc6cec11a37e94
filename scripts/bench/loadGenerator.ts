import { Agent, request } from "node:http";

/**
 * A closed-loop HTTP load generator, run as its own process so it does not share an event loop
 * with the server it measures: `node loadGenerator.ts <url> <json body> <concurrency> <ms>`.
 * Prints `{ requests, rps, statuses }` as JSON.
 */

const [url, body, concurrencyArgument, durationArgument] = process.argv.slice(2);
if (!url || body === undefined) throw new Error("usage: loadGenerator.ts url body concurrency ms");
const concurrency = Number(concurrencyArgument ?? 16);
const durationMs = Number(durationArgument ?? 5_000);
const target = new URL(url);
const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
const payload = Buffer.from(body);
const statuses: Record<number, number> = {};
let requests = 0;

function once(): Promise<void> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": payload.length },
      },
      (response) => {
        response.resume();
        response.on("end", () => {
          statuses[response.statusCode ?? 0] = (statuses[response.statusCode ?? 0] ?? 0) + 1;
          requests += 1;
          resolve();
        });
      },
    );
    outgoing.on("error", reject);
    outgoing.end(payload);
  });
}

const started = Date.now();
const deadline = started + durationMs;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (Date.now() < deadline) await once();
  }),
);
const seconds = (Date.now() - started) / 1000;
agent.destroy();
console.log(JSON.stringify({ requests, rps: requests / seconds, statuses }));
