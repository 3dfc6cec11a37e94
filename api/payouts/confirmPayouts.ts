import type { Hex, PublicClient } from "viem";
import { completeClaim, failClaim } from "../claims/completeClaim.ts";
import type { Database, Sql } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import type { ReceiptIssuer } from "../receipts/issueReceipt.ts";
import { type MinedReceipt, readReceipts } from "./payoutRpc.ts";

interface MinedCandidate {
  claim_id: string;
  nonce: bigint;
  attempts: Hex[];
}

type Resolution =
  | { claimId: string; kind: "success" | "reverted"; txHash: Hex; blockNumber: bigint }
  | { claimId: string; kind: "foreign"; nonce: bigint }
  | { claimId: string; kind: "unknown" };

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
 * that is not ours used the nonce.
 * Receipts of every attempt are read in batched requests. In one transaction per round:
 * success → payout `confirmed` and `completeClaim` (receipt signed, mail queued); reverted →
 * payout `reverted` and `failClaim(payout_reverted)`, terminal: a reverted payout is never
 * signed again. A used nonce with no attempt of ours mined is left alone (claim stays `paying`)
 * and reported to the caller: it needs a person, never a new signature.
 */
export async function confirmPayouts(
  sql: Database,
  rpc: PublicClient,
  issuer: ReceiptIssuer,
  latestNonce: bigint,
  limit: number,
  logger: Logger,
): Promise<ConfirmResult> {
  const candidates = await sql<MinedCandidate[]>`
    select p.claim_id, p.nonce, array_agg(a.tx_hash order by a.created_at) as attempts
    from app.payouts p
    join app.payout_attempts a on a.claim_id = p.claim_id
    where p.status in ('signed', 'broadcast') and p.nonce < ${latestNonce}
    group by p.claim_id, p.nonce
    order by p.nonce
    limit ${limit}`;
  const result: ConfirmResult = {
    confirmed: 0,
    reverted: 0,
    unresolved: [],
    more: false,
  };
  if (candidates.length === 0) return result;

  const receipts = await readReceipts(
    rpc,
    candidates.flatMap((candidate) => candidate.attempts),
  );
  const resolutions = candidates.map((candidate) => resolve(candidate, receipts));
  const decided = resolutions.filter(
    (resolution): resolution is Extract<Resolution, { kind: "success" | "reverted" }> =>
      resolution.kind === "success" || resolution.kind === "reverted",
  );
  result.unresolved = resolutions.filter(
    (resolution): resolution is Extract<Resolution, { kind: "foreign" }> =>
      resolution.kind === "foreign",
  );
  if (decided.length === 0) return result;
  // A full round with progress: more may be waiting. Unresolved ones alone never loop hot.
  result.more = candidates.length === limit;

  await sql.begin(async (transaction) => {
    // Another confirmer (a replica whose lock lapsed) may be storing the same outcomes.
    const locked = await transaction<{ claim_id: string }[]>`
      select claim_id from app.payouts
      where claim_id = any(${transaction.array(decided.map((resolution) => resolution.claimId))}::text[])
        and status in ('signed', 'broadcast')
      for update skip locked`;
    const lockedIds = new Set(locked.map((row) => row.claim_id));
    for (const resolution of decided) {
      if (!lockedIds.has(resolution.claimId)) continue;
      // A savepoint each: one claim that cannot be completed must not hold back the others.
      try {
        const stored = await transaction.savepoint((savepoint) =>
          storeOutcome(savepoint, issuer, resolution),
        );
        if (stored === "confirmed") result.confirmed += 1;
        if (stored === "reverted") {
          result.reverted += 1;
          logger.error(
            { claimId: resolution.claimId, txHash: resolution.txHash },
            "payout reverted on chain; the claim failed (payout_reverted)",
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

/** The payout's outcome and the claim's transition, together. */
async function storeOutcome(
  sql: Sql,
  issuer: ReceiptIssuer,
  resolution: Extract<Resolution, { kind: "success" | "reverted" }>,
): Promise<"confirmed" | "reverted" | "claim_not_paying"> {
  await sql`
    update app.payouts p
    set status = ${resolution.kind === "success" ? "confirmed" : "reverted"},
        tx_hash = a.tx_hash,
        raw_tx = a.raw_tx,
        block_number = ${resolution.blockNumber},
        confirmed_at = now(),
        last_error = ${resolution.kind === "reverted" ? "reverted on chain" : null}
    from app.payout_attempts a
    where p.claim_id = ${resolution.claimId} and a.tx_hash = ${resolution.txHash}`;
  if (resolution.kind === "reverted") {
    const failed = await failClaim(sql, { claimId: resolution.claimId, reason: "payout_reverted" });
    return failed ? "reverted" : "claim_not_paying";
  }
  const completed = await completeClaim(sql, issuer, {
    claimId: resolution.claimId,
    payoutTx: resolution.txHash,
  });
  return completed ? "confirmed" : "claim_not_paying";
}

function resolve(candidate: MinedCandidate, receipts: Map<Hex, MinedReceipt | null>): Resolution {
  let allKnownUnmined = true;
  for (const txHash of candidate.attempts) {
    const receipt = receipts.get(txHash);
    if (receipt === undefined) allKnownUnmined = false;
    if (!receipt) continue;
    return {
      claimId: candidate.claim_id,
      kind: receipt.status,
      txHash,
      blockNumber: receipt.blockNumber,
    };
  }
  return allKnownUnmined
    ? { claimId: candidate.claim_id, kind: "foreign", nonce: candidate.nonce }
    : { claimId: candidate.claim_id, kind: "unknown" };
}
