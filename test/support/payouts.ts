import { randomBytes } from "node:crypto";
import { type Address, getAddress, type Hex, parseAbiItem, parseEventLogs } from "viem";
import { expect } from "vitest";
import { createChainReader } from "../../api/chain/publicClient.ts";
import { insertClaim } from "../../api/claims/insertClaim.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { recordPayments } from "../../api/lifecycle/recordPayments.ts";
import { createLogger } from "../../api/logger.ts";
import { PAYOUT_ATOMIC, PRICE_ATOMIC } from "../../api/money.ts";
import { createPayoutWorkers } from "../../api/payouts/payoutWorkers.ts";
import type { ServiceDeps } from "../../api/serviceDeps.ts";
import type { Worker } from "../../api/workers/runWorker.ts";
import { testUsdcArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "./chain.ts";
import { testServiceConfig } from "./service.ts";
import { waitFor } from "./waitFor.ts";

export interface PaidClaim {
  id: string;
  payoutAddress: Address;
  email: string | null;
  paymentTx: Hex;
}

/**
 * Claims already `paid`, each with a payment recorded through the service's own writers
 * (insertClaim, then recordPayments) from a synthetic payment transaction (matching is tested
 * elsewhere), and a payout address of its own that has never held USDC. One transaction per
 * claim, so each has its own `paid_at` and the sender takes them in this order.
 */
export async function createPaidClaims(
  sql: Database,
  count: number,
  options: { email?: (index: number) => string | null; payoutAddresses?: Address[] } = {},
): Promise<PaidClaim[]> {
  const claims: PaidClaim[] = [];
  for (let index = 0; index < count; index += 1) {
    const payoutAddress =
      options.payoutAddresses?.[index] ?? getAddress(`0x${randomBytes(20).toString("hex")}`);
    const email = options.email?.(index) ?? null;
    const paymentTx: Hex = `0x${randomBytes(32).toString("hex")}`;
    const id = await sql.begin(async (transaction) => {
      const inserted = await insertClaim(transaction, TEST_CLAIM_SETTINGS, {
        flow: "claim",
        payoutAddress,
        email: email ?? undefined,
      });
      if (inserted.type !== "created") throw new Error(`claim not created: ${inserted.type}`);
      await recordPayments(transaction, [
        {
          claimId: inserted.claim.id,
          matchedBy: "amount",
          transfer: {
            txHash: paymentTx,
            logIndex: 0,
            blockNumber: 1n,
            blockHash: `0x${randomBytes(32).toString("hex")}`,
            from: payoutAddress.toLowerCase(),
            value: PRICE_ATOMIC,
            transferOrdinal: 1,
            authorizationNonce: null,
          },
          verified: true,
        },
      ]);
      return inserted.claim.id;
    });
    claims.push({ id, payoutAddress, email, paymentTx });
  }
  return claims;
}

/** Plain price claims (variant B): the payout tests need no unique amount. */
const TEST_CLAIM_SETTINGS = {
  claims: {
    variant: "B" as const,
    lifetimeSeconds: 7 * 24 * 3600,
    expiryGraceSeconds: 0,
    amountHoldSeconds: 0,
    amountSpaceSize: 999_999,
    amountSpaceWarnRatio: 0.5,
    openClaimsPerClient: 20,
    expiryIntervalMs: 1000,
  },
};

/**
 * The devnet token's unrestricted extras (`mint`, `blacklist`), sent by the deployer account;
 * returns once mined (mine a block yourself when automine is off).
 */
export async function callDevnetToken(
  chain: TestChain,
  call:
    | { functionName: "mint"; args: [Address, bigint] }
    | { functionName: "blacklist"; args: [Address] },
): Promise<void> {
  const hash = await chain.walletFor(accountWithRole(chain.accounts, "deployer")).writeContract({
    address: BASE_USDC_ADDRESS,
    abi: testUsdcArtifact.abi,
    functionName: call.functionName,
    args: call.args,
    gas: 100_000n,
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`${call.functionName} reverted`);
}

const transferEvent = parseAbiItem(
  "event Transfer(address indexed from, address indexed to, uint256 value)",
);

/** Every USDC transfer the payout wallet made, as the chain has them (not as the database says). */
export async function payoutTransfers(chain: TestChain) {
  const logs = await chain.publicClient.getLogs({
    address: BASE_USDC_ADDRESS,
    event: transferEvent,
    args: { from: chain.payout.address },
    fromBlock: 0n,
    toBlock: "latest",
  });
  return logs.map((log) => ({
    to: getAddress(log.args.to as Address),
    value: log.args.value as bigint,
    txHash: log.transactionHash,
    blockNumber: log.blockNumber,
  }));
}

/**
 * Holds that `hash` settled a payment and paid it out in one transaction
 * (docs/payments.md#one-transaction-settlement): the payer's 10 USDC to pay_to, then the payout
 * wallet's 1 USDC to the holder, and no other USDC transfer.
 */
export async function expectSettledWithPayout(
  chain: TestChain,
  hash: Hex,
  payer: Address,
  holder: Address,
): Promise<void> {
  const receipt = await chain.publicClient.getTransactionReceipt({ hash });
  const transfers = parseEventLogs({
    abi: [transferEvent],
    logs: receipt.logs,
    eventName: "Transfer",
  })
    .filter((log) => getAddress(log.address) === getAddress(BASE_USDC_ADDRESS))
    .map((log) => [getAddress(log.args.from), getAddress(log.args.to), log.args.value]);
  expect(transfers).toEqual([
    [getAddress(payer), chain.payTo.address, PRICE_ATOMIC],
    [chain.payout.address, getAddress(holder), PAYOUT_ATOMIC],
  ]);
}

/** The payouts the chain holds to one address (the ground truth of how many were made). */
export async function payoutTransfersTo(chain: TestChain, to: Address) {
  const recipient = getAddress(to);
  return (await payoutTransfers(chain)).filter((transfer) => transfer.to === recipient);
}

/** How many transfers the chain holds to each address. */
export function countByRecipient(transfers: { to: Address }[]): Map<Address, number> {
  const counts = new Map<Address, number>();
  for (const transfer of transfers) counts.set(transfer.to, (counts.get(transfer.to) ?? 0) + 1);
  return counts;
}

export async function claimStatuses(sql: Database, ids: string[]): Promise<Map<string, string>> {
  const rows = await sql<{ id: string; status: string }[]>`
    select id, status from app.claims where id = any(${sql.array(ids)}::text[])`;
  return new Map(rows.map((row) => [row.id, row.status]));
}

/** Waits until every claim in `ids` has `status`. */
export async function waitForStatus(
  sql: Database,
  ids: string[],
  status: string,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(
    async () => {
      const statuses = await claimStatuses(sql, ids);
      return ids.every((id) => statuses.get(id) === status);
    },
    { timeoutMs, what: `${ids.length} claims to be ${status}` },
  );
}

export interface PayoutRow {
  claim_id: string;
  to_address: string;
  nonce: bigint;
  tx_hash: Hex;
  status: string;
  broadcasts: number;
  last_error: string | null;
}

export async function payoutRows(sql: Database): Promise<PayoutRow[]> {
  return sql<PayoutRow[]>`
    select claim_id, to_address, nonce, tx_hash, status, broadcasts, last_error
    from app.payouts order by nonce`;
}

/**
 * The payout workers of one service process, driven tick by tick by the test (no lock, no
 * loop), on a database of their own connection pool: the test decides exactly what runs when.
 */
export async function createPayoutHarness(
  chain: TestChain,
  databaseUrl: string,
  overrides: Record<string, string> = {},
) {
  const config = testServiceConfig(chain, databaseUrl, overrides);
  const sql = connectDatabase(databaseUrl, { max: 5 });
  await migrate(sql);
  const deps: ServiceDeps = {
    sql,
    chain: createChainReader(config.chain.rpcUrl, config.chain.chainId),
    config,
    logger: createLogger(config.logLevel),
  };
  const [sender, confirmer] = createPayoutWorkers(deps) as [Worker, Worker];
  return {
    config,
    deps,
    sql,
    sender,
    confirmer,
    /** One round of each worker, sender first. */
    async round(): Promise<void> {
      await sender.tick();
      await confirmer.tick();
    },
    /**
     * Until every transaction the node took from the payout wallet is mined. Anvil answers a raw
     * transaction before its automine has mined it (24 of 300 reads of the latest nonce right
     * after one lagged here), so a confirmer ticked at once can miss the last payouts; CI met
     * that once under load.
     */
    async untilAcceptedMined(): Promise<void> {
      const count = (blockTag: "latest" | "pending") =>
        chain.publicClient.getTransactionCount({ address: config.payout.address, blockTag });
      await waitFor(async () => (await count("latest")) >= (await count("pending")), {
        what: "the payout wallet's accepted transactions mined",
        timeoutMs: 10_000,
      });
    },
    stop: () => sql.end({ timeout: 5 }),
  };
}
