import type { Address, Hex, PublicClient } from "viem";
import { isBlacklisted } from "../chain/blacklist.ts";
import type { Database, Sql, Transaction } from "../db/connect.ts";
import {
  type Completion,
  type CompletionResult,
  completeClaims,
} from "../lifecycle/completeClaims.ts";
import { failClaim } from "../lifecycle/failClaim.ts";
import { undoCompletion } from "../lifecycle/undoCompletion.ts";
import type { Logger } from "../logger.ts";
import type { ReceiptIssuer } from "../receipts/issueReceipt.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import { recordSettledWithPayout, recordSettleWithPayoutReverted } from "../x402/x402Payments.ts";
import { storeConfirmedTogether, storeMinedOutcome } from "./payoutRecords.ts";
import {
  type MinedReceipt,
  readReceipts,
  readWalletTransfers,
  type WalletTransfer,
} from "./payoutRpc.ts";
import { type PayoutSettlement, readPayoutSettlements } from "./payoutSettlements.ts";

/** How far back the wallet's logs are read when no mined payout below the candidates is stored. */
const LOG_WINDOW_BLOCKS = 16n;
/** The most blocks one read of the wallet's logs spans (providers cap ranges; ~17 min on Base). */
const MAX_LOG_RANGE_BLOCKS = 500n;

interface MinedCandidate {
  claim_id: string;
  nonce: bigint;
  to_address: string;
  settles_x402: boolean;
  attempts: Hex[];
}

type Resolution =
  | {
      claimId: string;
      nonce: bigint;
      to: Address;
      kind: "success" | "reverted";
      txHash: Hex;
      blockNumber: bigint;
      blockHash: Hex;
      /** A settle-and-pay payout: its transaction is also the claim's payment, or neither. */
      settlesX402: boolean;
    }
  | { claimId: string; kind: "foreign"; nonce: bigint }
  | { claimId: string; kind: "unknown" };

type Mined = Extract<Resolution, { kind: "success" | "reverted" }>;

export interface ConfirmResult {
  confirmed: number;
  reverted: number;
  /** Nonces used, yet none of the payout's attempts shows as mined (or not known yet). */
  unresolved: Extract<Resolution, { kind: "foreign" }>[];
  /** The round was full: more may be waiting. */
  more: boolean;
}

/**
 * Stores the outcome of payouts whose nonce the chain has used (below `latestNonce`, the
 * wallet's mined transaction count): one of the payout's attempts was mined, or a transaction
 * that is not ours used the nonce. The wallet's transfer logs since the block of the last mined
 * payout below them say which attempts succeeded, in one request (readWalletTransfers); the
 * receipts of the other candidates' attempts are read in batched requests.
 * In one transaction per round:
 * - success → payout `confirmed` and its claim completed (receipt signed, naming the block):
 *   all of a round's successes together, in a few statements (a burst is thousands); should
 *   that fail, each on its own, so one claim that cannot be completed holds back no other;
 * - reverted because the token blacklists the recipient → payout `reverted` and the claim
 *   fails (`payout_reverted`): no retry can cure it;
 * - reverted for any other reason (the wallet was drained meanwhile, say) → payout `reverted`,
 *   the claim stays `paying`; once that revert is final the sender signs a new payout;
 * - reverted, for a claim completed with this payout before a reorg took it away → the
 *   completion is undone first (receipt withdrawn, claim `paying`), then as above
 *   (docs/operating.md#payout-reorgs).
 * A used nonce with no attempt of ours mined is left alone (claim stays `paying`) and reported
 * to the caller: it needs a person (reissuePayout.ts, `pay-and-earn reissue-payout`), never an automatic new signature.
 */
export async function confirmPayouts(
  deps: {
    sql: Database;
    usdc: Address;
    wallet: Address;
    payTo: Address;
    network: `${string}:${string}`;
    logger: Logger;
  },
  rpc: PublicClient,
  issuer: ReceiptIssuer,
  latestNonce: bigint,
  limit: number,
): Promise<ConfirmResult> {
  const { sql, logger } = deps;
  const candidates = await sql<MinedCandidate[]>`
    select p.claim_id, p.nonce, p.to_address, p.settles_x402,
      array_agg(a.tx_hash order by a.created_at) as attempts
    from app.payouts p
    join app.payout_attempts a on a.nonce = p.nonce
    where p.status in ('signed', 'broadcast') and p.nonce < ${latestNonce}
    group by p.claim_id, p.nonce, p.to_address, p.settles_x402
    order by p.nonce
    limit ${limit}`;
  const result: ConfirmResult = { confirmed: 0, reverted: 0, unresolved: [], more: false };
  if (candidates.length === 0) return result;

  const transfers = await readWalletTransfers(rpc, {
    usdc: deps.usdc,
    wallet: deps.wallet,
    recipients: candidates.map((candidate) => candidate.to_address as Address),
    fromBlock: await logsFromBlock(sql, rpc, candidates[0]?.nonce ?? 0n),
  });
  const fromLogs = new Map<bigint, Mined>();
  for (const candidate of candidates) {
    const found = transfers && succeededAttempt(candidate, transfers);
    if (found) fromLogs.set(candidate.nonce, found);
  }
  const receipts = await readReceipts(
    rpc,
    candidates
      .filter((candidate) => !fromLogs.has(candidate.nonce))
      .flatMap((candidate) => candidate.attempts),
  );
  const resolutions = candidates.map(
    (candidate) => fromLogs.get(candidate.nonce) ?? resolve(candidate, receipts),
  );
  const mined = resolutions.filter(
    (resolution): resolution is Mined =>
      resolution.kind === "success" || resolution.kind === "reverted",
  );
  // A settle-and-pay payout that succeeded is stored with its claim's payment, read from its
  // receipt; one whose payment cannot be read now waits for the next round.
  const settlements = await readPayoutSettlements(
    sql,
    rpc,
    { usdc: deps.usdc, payTo: deps.payTo, network: deps.network },
    mined
      .filter((resolution) => resolution.settlesX402 && resolution.kind === "success")
      .map((resolution) => ({ claimId: resolution.claimId, txHash: resolution.txHash })),
  );
  const decided = mined.filter(
    (resolution) =>
      !resolution.settlesX402 ||
      resolution.kind === "reverted" ||
      settlements.has(resolution.claimId),
  );
  result.unresolved = resolutions.filter(
    (resolution): resolution is Extract<Resolution, { kind: "foreign" }> =>
      resolution.kind === "foreign",
  );
  if (decided.length === 0) return result;
  // A full round with progress: more may be waiting. Unresolved ones alone never loop hot.
  result.more = candidates.length === limit;
  // Read before the transaction: the one revert no retry cures, asked of the token itself.
  const blacklisted = new Set<string>();
  for (const resolution of decided) {
    if (resolution.kind !== "reverted") continue;
    if (await isBlacklisted(rpc, deps.usdc, resolution.to, resolution.blockNumber)) {
      blacklisted.add(resolution.claimId);
    }
  }

  await sql.begin(async (transaction) => {
    // Another confirmer (a replica whose lock lapsed) may be storing the same outcomes.
    const locked = await transaction<{ nonce: bigint }[]>`
      select nonce from app.payouts
      where nonce = any(${decided.map((resolution) => String(resolution.nonce))}::int8[])
        and status in ('signed', 'broadcast')
      for update skip locked`;
    const lockedNonces = new Set(locked.map((row) => row.nonce));
    const mine = decided.filter((resolution) => lockedNonces.has(resolution.nonce));
    const successes = mine.filter((resolution) => resolution.kind === "success");
    const storedTogether = await storeSuccessesTogether(
      transaction,
      issuer,
      successes,
      settlements,
      logger,
    );
    if (storedTogether) result.confirmed += storedTogether.completed.length;
    // The reverts always; the successes too when they could not be stored together.
    const oneByOne = storedTogether
      ? mine.filter((resolution) => resolution.kind === "reverted")
      : mine;
    for (const resolution of oneByOne) {
      // A savepoint each: one claim that cannot be completed must not hold back the others.
      try {
        const stored = await transaction.savepoint((savepoint) =>
          storeOutcome(
            savepoint,
            issuer,
            resolution,
            blacklisted.has(resolution.claimId),
            settlements.get(resolution.claimId),
          ),
        );
        if (stored === "confirmed") result.confirmed += 1;
        if (stored === "failed" || stored === "retried" || stored === "undone") {
          result.reverted += 1;
          logger[stored === "failed" ? "error" : "warn"](
            { claimId: resolution.claimId, txHash: resolution.txHash },
            stored === "failed"
              ? "payout reverted: the token blacklists the recipient; the claim failed (payout_reverted)"
              : stored === "undone"
                ? "a reorg undid a completed claim's payout (mined again, reverted): receipt withdrawn, the claim is paying again and gets a new payout once this one is final"
                : "payout reverted; the claim stays paying and gets a new payout once this one is final",
          );
        }
        if (stored === "claim_not_paying") {
          logger.warn({ claimId: resolution.claimId }, "payout mined for a claim not paying");
        }
      } catch (error) {
        logger.error(
          { err: error, claimId: resolution.claimId, txHash: resolution.txHash },
          "could not store a mined payout; retried next round",
        );
      }
    }
  });
  return result;
}

/**
 * The round's successes in one savepoint (storeSuccesses), with what it left alone logged; null
 * when that failed and rolled back, and they are to be stored one by one.
 */
async function storeSuccessesTogether(
  transaction: Transaction,
  issuer: ReceiptIssuer,
  successes: Mined[],
  settlements: Map<string, PayoutSettlement>,
  logger: Logger,
): Promise<CompletionResult | null> {
  if (successes.length === 0) {
    return { completed: [], notPaying: [], withoutPayment: [], receiptRenamed: [] };
  }
  try {
    const completion = await transaction.savepoint((savepoint) =>
      storeSuccesses(savepoint, issuer, successes, settlements),
    );
    for (const claimId of completion.withoutPayment) {
      logger.error({ claimId }, "a paying claim has no payment; its payout is retried next round");
    }
    for (const { claimId, status } of completion.notPaying) {
      if (status !== "completed") logger.warn({ claimId }, "payout mined for a claim not paying");
    }
    for (const claimId of completion.receiptRenamed) {
      logger.warn(
        { claimId },
        "a reorg mined another attempt of a completed claim's payout: receipt signed again naming it",
      );
    }
    return completion;
  } catch (error) {
    logger.warn(
      { err: error, payouts: successes.length },
      "could not store the round's mined payouts together; storing them one by one",
    );
    return null;
  }
}

/**
 * Successful payouts, together: their claims completed (completeClaims), then the payouts
 * stored as `confirmed`, except those of claims without a payment (left for the next round and
 * a person, as the one-by-one path leaves them). A payout whose claim is not `paying` is stored
 * all the same: mined again after a reorg, its claim was completed already.
 */
async function storeSuccesses(
  sql: Transaction,
  issuer: ReceiptIssuer,
  successes: Mined[],
  settlements: Map<string, PayoutSettlement>,
): Promise<CompletionResult> {
  for (const resolution of successes) {
    const settlement = settlements.get(resolution.claimId);
    if (settlement) await recordSettledWithPayout(sql, settlement);
  }
  const completion = await completeClaims(sql, issuer, successes.map(completionOf));
  const broken = new Set(completion.withoutPayment);
  const stored = successes.filter((resolution) => !broken.has(resolution.claimId));
  if (stored.length > 0) {
    const confirmed = await storeConfirmedTogether(sql, stored);
    // Every completed claim's payout is stored with it, or nothing is (the savepoint rolls
    // back and the round goes one by one).
    if (confirmed !== stored.length) {
      throw new Error(`${confirmed} of ${stored.length} mined payouts could be stored`);
    }
  }
  return completion;
}

/** The payout's outcome and the claim's transition, together. */
async function storeOutcome(
  sql: Transaction,
  issuer: ReceiptIssuer,
  resolution: Mined,
  recipientBlacklisted: boolean,
  settlement: PayoutSettlement | undefined,
): Promise<"confirmed" | "mined_again" | "failed" | "retried" | "undone" | "claim_not_paying"> {
  const revertReason =
    resolution.kind === "success"
      ? null
      : recipientBlacklisted
        ? "recipient_blacklisted"
        : "reverted";
  await storeMinedOutcome(sql, resolution, revertReason);
  if (resolution.kind === "reverted" && resolution.settlesX402) {
    // Neither leg happened. Reverted at its first mining, its claim still awaits the payment;
    // mined again as reverted after a reorg, the claim was completed: as for any payout below.
    const settled = await recordSettleWithPayoutReverted(
      sql,
      resolution.claimId,
      recipientBlacklisted,
    );
    if (settled === "failed") return "failed";
    if (settled === "unknown") return "retried";
  }
  if (resolution.kind === "reverted") {
    const undone = await undoCompletion(sql, {
      claimId: resolution.claimId,
      nonce: resolution.nonce,
    });
    if (!recipientBlacklisted) return undone ? "undone" : "retried";
    const failed = await failClaim(sql, { claimId: resolution.claimId, reason: "payout_reverted" });
    return failed ? "failed" : "claim_not_paying";
  }
  if (settlement) await recordSettledWithPayout(sql, settlement);
  const completion = await completeClaims(sql, issuer, [completionOf(resolution)]);
  if (completion.withoutPayment.length > 0) {
    // Rolls this savepoint back, the payout's update included: retried next round.
    throw new Error(`Claim ${resolution.claimId} is paying without a payment`);
  }
  if (completion.completed.length > 0) return "confirmed";
  // A payout a reorg took away and the chain mined again: its claim was completed already.
  return completion.notPaying[0]?.status === "completed" ? "mined_again" : "claim_not_paying";
}

/** What completing the claim of a mined payout needs: the payout and its block. */
function completionOf(resolution: Mined): Completion {
  return {
    claimId: resolution.claimId,
    payoutTx: resolution.txHash,
    payoutBlock: resolution.blockNumber,
  };
}

/**
 * The first block the candidates can be mined in: nonces are mined in order, so not before the
 * last stored mined payout below the lowest of them. Without one (the first payouts, or only
 * fillers below), the last LOG_WINDOW_BLOCKS; never more than MAX_LOG_RANGE_BLOCKS back (a
 * payout whose nonce a foreign transaction took stays the lowest candidate until a person
 * re-issues it). A bound that turns out too late only sends candidates to their receipts.
 */
async function logsFromBlock(sql: Sql, rpc: PublicClient, lowestNonce: bigint): Promise<bigint> {
  const [[below], head] = await Promise.all([
    sql<{ block_number: bigint | null }[]>`
      select block_number from app.payouts
      where nonce < ${lowestNonce} and status in ('confirmed', 'reverted')
      order by nonce desc limit 1`,
    rpc.getBlockNumber({ cacheTime: 0 }),
  ]);
  const from = below?.block_number != null ? BigInt(below.block_number) : head - LOG_WINDOW_BLOCKS;
  return from > head - MAX_LOG_RANGE_BLOCKS ? from : head - MAX_LOG_RANGE_BLOCKS;
}

/** The candidate's attempt that left a transfer log from the wallet: mined, and succeeded. */
function succeededAttempt(
  candidate: MinedCandidate,
  transfers: Map<Hex, WalletTransfer>,
): Mined | null {
  for (const txHash of candidate.attempts) {
    const transfer = transfers.get(txHash.toLowerCase() as Hex);
    if (!transfer) continue;
    return {
      claimId: candidate.claim_id,
      nonce: candidate.nonce,
      to: checksummed(candidate.to_address),
      kind: "success",
      txHash,
      blockNumber: transfer.blockNumber,
      blockHash: transfer.blockHash,
      settlesX402: candidate.settles_x402,
    };
  }
  return null;
}

function resolve(candidate: MinedCandidate, receipts: Map<Hex, MinedReceipt | null>): Resolution {
  let allKnownUnmined = true;
  for (const txHash of candidate.attempts) {
    const receipt = receipts.get(txHash);
    if (receipt === undefined) allKnownUnmined = false;
    if (!receipt) continue;
    return {
      claimId: candidate.claim_id,
      nonce: candidate.nonce,
      to: checksummed(candidate.to_address),
      kind: receipt.status,
      txHash,
      blockNumber: receipt.blockNumber,
      blockHash: receipt.blockHash,
      settlesX402: candidate.settles_x402,
    };
  }
  return allKnownUnmined
    ? { claimId: candidate.claim_id, kind: "foreign", nonce: candidate.nonce }
    : { claimId: candidate.claim_id, kind: "unknown" };
}
