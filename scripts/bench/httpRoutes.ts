import { ExactEvmScheme as ExactEvmClient } from "@x402/evm";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { BenchInfrastructure } from "./benchStack.ts";

/**
 * The service's settings under HTTP load: no rate limits, no cap on open claims (every request
 * comes from one address), and the default log level, as `npm start` runs it: one log line per
 * request is part of the cost.
 */
export const HTTP_BENCH_SERVICE_ENV = {
  RATE_LIMIT_ENABLED: "false",
  OPEN_CLAIMS_PER_CLIENT: "0",
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
};

/** The routes `bench:http` and `bench:ab` load, with what each must answer and its target. */
export interface BenchRoute {
  name: string;
  method: "GET" | "POST";
  path: string;
  body?: unknown;
  expected: number;
  /** Minimum share of bare Express (issue 14). */
  target: number;
  varyPayoutAddress?: boolean;
  /** Paths taken in turn instead of `path` alone. */
  paths?: string[];
}

/** The routes, given the claims `seedLedger` completed (their ids). */
export function benchRoutes(claimIds: string[]): BenchRoute[] {
  return [
    { name: "GET /api/info", method: "GET", path: "/api/info", expected: 200, target: 0.5 },
    {
      name: "GET /api/claims/{id}",
      method: "GET",
      // Every seeded claim in turn: many clients polling their own claims, not one.
      path: `/api/claims/${claimIds[0]}`,
      paths: claimIds.map((claimId) => `/api/claims/${claimId}`),
      expected: 200,
      target: 0.5,
    },
    { name: "GET /api/ledger", method: "GET", path: "/api/ledger", expected: 200, target: 0.5 },
    { name: "GET /ledger (HTML)", method: "GET", path: "/ledger", expected: 200, target: 0.5 },
    {
      name: "POST /api/claims",
      method: "POST",
      path: "/api/claims",
      body: { agent_name: "bench" },
      expected: 201,
      target: 0.25,
      varyPayoutAddress: true,
    },
    {
      name: "POST /api/x402/earn (402)",
      method: "POST",
      path: "/api/x402/earn",
      body: { payout_address: "0x000000000000000000000000000000000000dEaD", agent_name: "load" },
      expected: 402,
      target: 0.6,
    },
    {
      name: "POST /graphql (ledger)",
      method: "POST",
      path: "/graphql",
      body: {
        query:
          "{ ledger(first: 20) { edges { cursor node { claimId agentName payoutAddress amountUsdc payoutTx completedAt } } pageInfo { hasNextPage endCursor } } }",
      },
      expected: 200,
      target: 0.5,
    },
  ];
}

/** BENCH_ROUTES=info,ledger: only the routes whose names contain one of these. */
export function chosenRoutes<Route extends BenchRoute>(routes: Route[]): Route[] {
  const only = process.env.BENCH_ROUTES?.split(",");
  return routes.filter((route) => !only || only.some((part) => route.name.includes(part)));
}

const USDC = 1_000_000n;

/**
 * `entries` completed x402 payouts, paid with the official client, so the ledger, its page and
 * the claim reads serve real rows; answers the claims' ids.
 */
export async function seedLedger(
  infrastructure: BenchInfrastructure,
  serviceUrl: string,
  entries: number,
): Promise<string[]> {
  await infrastructure.mint(infrastructure.payer.address, BigInt(entries + 5) * 10n * USDC);
  const client = x402Client.fromConfig({
    schemes: [
      {
        network: "eip155:8453",
        client: new ExactEvmClient(privateKeyToAccount(infrastructure.payer.privateKey)),
      },
    ],
    spendControls: { maxAmountPerPayment: "$10" },
  });
  const pay = wrapFetchWithPayment(fetch, client);
  const claimIds: string[] = [];
  for (let index = 0; index < entries; index++) {
    const response = await pay(`${serviceUrl}/api/x402/earn`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        payout_address: privateKeyToAccount(generatePrivateKey()).address,
        agent_name: `bench-${index}`,
      }),
    });
    const body = (await response.json()) as { claim_id?: string; status?: string };
    if (response.status !== 200 || body.status !== "completed" || !body.claim_id) {
      throw new Error(`seeding the ledger: ${response.status} ${JSON.stringify(body)}`);
    }
    claimIds.push(body.claim_id);
  }
  return claimIds;
}
