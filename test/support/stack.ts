import { readIndexedBlock } from "../../api/chain/indexedBlock.ts";
import type { RunningService } from "../../api/service.ts";
import type { RunningPonder } from "../../scripts/devnet/ponder.ts";
import { startTestChain, type TestChain } from "./chain.ts";
import { createTestDatabase, type TestDatabase } from "./database.ts";
import { requestJson } from "./http.ts";
import { startTestIndexer } from "./indexer.ts";
import { startRpcProxy } from "./rpcProxy.ts";
import { startTestService } from "./service.ts";
import { waitFor } from "./waitFor.ts";

/** What POST /api/claims answers (the fields tests read). */
export type CreatedClaim = Record<string, unknown> & { claim_id: string; amount_due_usdc: string };

/**
 * Fast settings for tests: two confirmations, and loops that wait for their wake-ups. The payout
 * sender is woken when a claim is paid, the confirmer when a payout is broadcast, the matcher
 * when the indexer commits a block (api/workers/wakeChannels.ts), so their intervals are only
 * the fallback. An idle stack's workers went from 46 to 19 transactions a second, and from 5.7%
 * to 2.5% of a core, when these went from 200 and 250 ms to 1 s (BENCHMARKS.md#test-suite).
 */
export const FAST_SERVICE_ENV = {
  CONFIRMATIONS: "2",
  MATCHER_INTERVAL_MS: "1000",
  PAYOUT_INTERVAL_MS: "1000",
};

/**
 * How often a wait on the API asks again. Each ask is a request, the service's queries and the
 * answer: at waitFor's 50 ms, a test waiting for its claim's blocks kept the service and the
 * database busy for nothing.
 */
const API_POLL_MS = 200;

/**
 * The whole service for one test file: its own Anvil, database, Ponder and service
 * (in-process, workers included).
 */
export async function startStack(
  options: {
    serviceEnv?: Record<string, string>;
    blockTimeSeconds?: number;
    /** Put a JSON-RPC proxy of the test's own between the service and Anvil (not Ponder). */
    rpcProxy?: boolean;
    /** Give the payouts their own RPC (PAYOUT_RPC_URL): another proxy in front of Anvil. */
    payoutRpcProxy?: boolean;
  } = {},
) {
  const [chain, database] = await Promise.all([
    startTestChain({ blockTimeSeconds: options.blockTimeSeconds }),
    createTestDatabase(),
  ]);
  const rpcProxy = options.rpcProxy ? await startRpcProxy(chain.rpcUrl) : undefined;
  const payoutRpcProxy = options.payoutRpcProxy ? await startRpcProxy(chain.rpcUrl) : undefined;
  const ponder: RunningPonder = await startTestIndexer(chain, database.url);
  const service: RunningService = await startTestService(chain, database.url, {
    ...FAST_SERVICE_ENV,
    ...(rpcProxy ? { RPC_URL: rpcProxy.url } : {}),
    ...(payoutRpcProxy ? { PAYOUT_RPC_URL: payoutRpcProxy.url } : {}),
    ...options.serviceEnv,
  });
  const api = <Body = Record<string, unknown>>(
    path: string,
    init?: Parameters<typeof requestJson>[1],
  ) => requestJson<Body>(`${service.url}${path}`, init);

  return {
    chain,
    database,
    ponder,
    service,
    rpcProxy,
    payoutRpcProxy,
    api,
    /** POST /api/claims as a client would; throws unless the claim is created (201). */
    async createClaim(payoutAddress: string, extra: Record<string, string> = {}) {
      const response = await api<CreatedClaim>("/api/claims", {
        body: { payout_address: payoutAddress, ...extra },
      });
      if (response.status !== 201) {
        throw new Error(
          `POST /api/claims answered ${response.status}: ${JSON.stringify(response.body)}`,
        );
      }
      return response.body;
    },
    /**
     * Waits until the indexer has processed the chain's head block. Call it before an
     * `anvil_reorg` while the indexer runs: Ponder (0.16.10) that has read a block and not yet
     * its logs when the block goes asks for them by its hash for ever ("unknown block") and
     * indexes nothing more (docs/traps.md#ponder).
     */
    async untilIndexedHead(): Promise<void> {
      const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
      await waitFor(async () => ((await readIndexedBlock(service.sql, 8453)) ?? -1n) >= head, {
        what: `the indexer to reach block ${head}`,
      });
    },
    /** Polls GET /api/claims/{id} until the claim has `status`; returns that claim. */
    untilClaimStatus: (claimId: string, status: string) =>
      waitFor(
        async () => {
          const claim = await api(`/api/claims/${claimId}`);
          return claim.body.status === status ? claim.body : undefined;
        },
        { what: `claim ${claimId} to be ${status}`, intervalMs: API_POLL_MS },
      ),
    /**
     * Polls GET /api/payments/{hash} until the first transfer to pay_to in the transaction is in
     * `state`; returns that transfer as the API shows it.
     */
    untilTransferState: (hash: string, state: string) =>
      waitFor(
        async () => {
          const response = await api(`/api/payments/${hash}`);
          const [transfer] = (response.body.transfers ?? []) as Record<string, unknown>[];
          return transfer?.state === state ? transfer : undefined;
        },
        { what: `the transfer in ${hash} to be ${state}`, intervalMs: API_POLL_MS },
      ),
    /** How many claims the database holds (to prove a refusal created none). */
    async claimCount(): Promise<number> {
      const [row] = await service.sql<{ n: number }[]>`select count(*)::int as n from app.claims`;
      return row?.n ?? -1;
    },
    /** Mines `blocks` empty blocks, e.g. to give a transfer its confirmations. */
    mine: (blocks: number) => chain.testClient.mine({ blocks }),
    /**
     * Mines a block per poll until `check` holds: for waits that need the chain to move on
     * (depth). Gently: every block is work for the indexer, which a loaded machine must keep up
     * with. The default gives up within a test's 60 s, so a wait that runs out names itself.
     */
    whileMining: <T>(
      check: () => Promise<T | undefined | false>,
      what: string | (() => string),
      options: { timeoutMs?: number; intervalMs?: number } = {},
    ) =>
      waitFor(
        async () => {
          const value = await check();
          if (value) return value;
          await chain.testClient.mine({ blocks: 1 });
          return undefined;
        },
        { what, timeoutMs: options.timeoutMs ?? 40_000, intervalMs: options.intervalMs ?? 500 },
      ),
    async stop() {
      await service.stop();
      await rpcProxy?.stop();
      await payoutRpcProxy?.stop();
      await ponder.stop();
      await chain.stop();
      await database.drop();
    },
  };
}

export type Stack = Awaited<ReturnType<typeof startStack>>;
export type { TestChain, TestDatabase };
