import { type Hex, recoverMessageAddress } from "viem";
import { receiptWithin } from "../chain/transferLogs.ts";
import type { Sql, Transaction } from "../db/connect.ts";
import { nameTransaction, releaseTransactionName } from "../lifecycle/nameTransaction.ts";
import { paidTransfers } from "../lifecycle/paidTransfers.ts";
import { recordPayments } from "../lifecycle/recordPayments.ts";
import { disqualification } from "../matching/qualifies.ts";
import { PRICE_ATOMIC } from "../money.ts";
import type { NotQualifyingReason } from "../reasons/reasonCatalog.ts";
import { type InvalidRequest, invalidRequest, type Refusal } from "../reasons/refusal.ts";
import { attachTxRequest, CLAIM_ID_PATTERN } from "../schemas/inputs.ts";
import { parseInput } from "../schemas/parseInput.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { type ClaimDetails, readClaim } from "./readClaim.ts";
import {
  type EvidenceTransfer,
  readTransferEvidence,
  type TransferEvidence,
} from "./transferEvidence.ts";

/** How an attached transaction stands: it has paid the claim, or will once it confirms. */
export type AttachedState = "matched" | "awaiting_confirmations" | "not_mined_yet";

/** Why a transaction cannot be attached (also when it is named at a claim's creation). */
export type AttachRefusal = Extract<
  Refusal,
  {
    type:
      | "claim_not_found"
      | "claim_expired"
      | "claim_not_open"
      | "tx_already_used"
      | "tx_not_qualifying"
      | "x402_claim_not_attachable";
  }
>;

export type AttachOutcome =
  | { type: "attached"; state: AttachedState; signed: boolean }
  | AttachRefusal;

export type AttachResult =
  | { type: "attached"; state: AttachedState; signed: boolean; txHash: Hex; claim: ClaimDetails }
  | AttachRefusal
  | InvalidRequest;

export interface ClaimToAttach {
  id: string;
  flow: string;
  status: string;
  payout_address: string;
  amount_due: string;
  tx_hash: string | null;
  tx_hash_signed: boolean;
  expires_at: Date;
}

/** What is known before the lock is taken: the chain's evidence and who signed, if anyone. */
export interface AttachRequest {
  txHash: Hex;
  evidence: TransferEvidence;
  /** The address that signed the claim id (EIP-191), when a signature came with the request. */
  signer: string | null;
}

/**
 * POST /api/claims/{id}/tx and every surface that attaches: names the transaction that paid
 * (or will pay) the claim, and answers with the claim as it now stands. The chain is read
 * first; the rules run under the matching lock on the database alone.
 */
export async function attachTx(
  deps: ServiceDeps,
  claimId: string,
  request: unknown,
): Promise<AttachResult> {
  if (!CLAIM_ID_PATTERN.test(claimId)) return { type: "claim_not_found", claimId };
  const input = parseInput(attachTxRequest, request);
  if (!input.ok) return invalidRequest(input.errors);
  const { tx_hash: txHash, signature } = input.value;
  const signer = signature ? await signerOf(claimId, signature) : null;
  let evidence = await readTransferEvidence(deps, txHash);
  // Only a valid signature for a claim that exists waits: a made-up hash or id costs one read.
  if (evidence.kind === "not_mined" && signer && (await claimExists(deps.sql, claimId))) {
    const waited = { waitMs: SIGNED_ATTACH_WAIT_MS, pollMs: SIGNED_ATTACH_POLL_MS };
    if (await receiptWithin(deps.chain, txHash, waited)) {
      evidence = await readTransferEvidence(deps, txHash);
    }
  }
  const attach: AttachRequest = { txHash, evidence, signer };
  const outcome = await deps.sql.begin(async (transaction): Promise<AttachOutcome> => {
    await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
    const [claim] = await transaction<ClaimToAttach[]>`
      select id, flow, status, payout_address, amount_due, tx_hash, tx_hash_signed, expires_at
      from app.claims where id = ${claimId} for update`;
    if (!claim) return { type: "claim_not_found", claimId };
    return attachTxInTransaction(transaction, deps, claim, attach);
  });
  if (outcome.type !== "attached") return outcome;
  const claim = await readClaim(deps.sql, claimId);
  if (!claim) return { type: "claim_not_found", claimId };
  return { ...outcome, txHash, claim };
}

/**
 * How long a signed attach waits for a transaction the service's node does not have mined yet:
 * three of Base's blocks. Its sender can only be read from the chain, so it cannot be named before;
 * a client attaches once its own node shows the receipt, and the service's node may be a block
 * behind, or the block may just have been reorganised away and not mined again yet. Refused then
 * (`not_mined_to_sign`), the transfer could meanwhile be matched by the sender rule to another open
 * claim of the same wallet (found by the fault suite: RELIABILITY.md#what-the-suite-found).
 */
const SIGNED_ATTACH_WAIT_MS = 6_000;
const SIGNED_ATTACH_POLL_MS = 250;

/** The sender of the claim's payment on record when it is a transfer of `hash`, else null. */
async function paidBy(sql: Sql, claimId: string, hash: string): Promise<string | null> {
  const [row] = await sql<{ from_address: string }[]>`
    select from_address from app.payments where claim_id = ${claimId} and tx_hash = ${hash}`;
  return row?.from_address ?? null;
}

async function claimExists(sql: Sql, claimId: string): Promise<boolean> {
  const [row] = await sql`select 1 from app.claims where id = ${claimId}`;
  return row !== undefined;
}

/** The address whose EIP-191 signature of the claim id this is; null if it is no signature. */
async function signerOf(claimId: string, signature: Hex): Promise<string | null> {
  try {
    return (await recoverMessageAddress({ message: claimId, signature })).toLowerCase();
  } catch {
    return null;
  }
}

/**
 * The rules of attaching, inside the caller's transaction, which must hold the `matching`
 * advisory lock (so the matcher cannot pass over the transfer at the same moment). SPEC.md
 * "Payment matching" 3: only a transfer that meets the deployment's condition, and:
 * - never to an x402 claim (paid by its authorization only);
 * - a transfer already used (by its identity or its EIP-3009 authorization) pays nothing more;
 * - a transfer from another open claim's payout address belongs to that claim, unless its
 *   sender signed this claim's id;
 * - a signed attach takes an unpaid transfer from a claim that named it unsigned, never the
 *   other way round;
 * - a claim's named hash is replaced only by a mined transfer that qualifies;
 * - the transfer's block time, not the clock, says whether it came before the claim expired.
 * A transfer not mined yet is named and the matcher pays the claim once it confirms; one the
 * matcher already passed over as unmatched pays it now.
 */
export async function attachTxInTransaction(
  transaction: Transaction,
  deps: Pick<ServiceDeps, "config">,
  claim: ClaimToAttach,
  attach: AttachRequest,
): Promise<AttachOutcome> {
  const hash = attach.txHash.toLowerCase();
  const signed = attach.signer !== null;
  if (claim.flow === "x402") return { type: "x402_claim_not_attachable" };
  if (claim.status !== "awaiting_payment" && claim.status !== "expired") {
    // Naming the transaction that already paid this claim again is not an error, whether the
    // claim named it or the matcher paid the claim by its amount or its sender first (a late
    // attach, or one retried while the service restarted).
    if (claim.tx_hash === hash) return { type: "attached", state: "matched", signed };
    const payer = await paidBy(transaction, claim.id, hash);
    if (payer !== null) {
      // Signed only when the transfer's own sender signed: any wallet can sign a claim id.
      return { type: "attached", state: "matched", signed: attach.signer === payer };
    }
    return { type: "claim_not_open", claimStatus: claim.status };
  }
  const expiredNow = claim.status === "expired" || claim.expires_at < new Date();
  const [named] = await transaction<{ id: string; tx_hash_signed: boolean }[]>`
    select id, tx_hash_signed from app.claims where tx_hash = ${hash} and id <> ${claim.id}`;
  // A signed attach takes the hash from a claim that named it unsigned (if that transfer had
  // paid it, the transfer is used and the attach is refused below).
  const takeable = signed && named && !named.tx_hash_signed;
  if (named && !takeable) return { type: "tx_already_used" };
  if (claim.tx_hash && claim.tx_hash !== hash && claim.tx_hash_signed && !signed) {
    return { type: "tx_already_used" };
  }

  const { evidence } = attach;
  if (evidence.kind === "not_mined") {
    if (expiredNow) return { type: "claim_expired" };
    if (signed) return notQualifying("not_mined_to_sign");
    if (claim.tx_hash && claim.tx_hash !== hash) return notQualifying("replacement_not_mined");
    await nameTransaction(transaction, claim.id, hash, false);
    return { type: "attached", state: "not_mined_yet", signed: false };
  }
  if (evidence.kind === "reverted") return notQualifying("tx_reverted");
  if (evidence.transfers.length === 0) return notQualifying("no_transfer_to_pay_to");

  const verdicts = await judgeTransfers(transaction, deps, claim, attach, evidence.transfers);
  const chosen = verdicts.find((verdict) => verdict.problem === null);
  if (!chosen) {
    const problems = verdicts.map((verdict) => verdict.problem);
    if (problems.includes("used")) return { type: "tx_already_used" };
    if (problems.includes("expired")) return { type: "claim_expired" };
    const reason = problems.find(
      (problem): problem is NotQualifyingReason =>
        problem !== null && problem !== "used" && problem !== "expired",
    );
    return notQualifying(reason ?? "no_transfer_to_pay_to");
  }

  if (named) await releaseTransactionName(transaction, named.id);
  await nameTransaction(transaction, claim.id, hash, signed);
  const transfer = chosen.transfer;
  // The matcher saw this transfer (confirmed) before the claim named it: pay the claim now.
  // Asked under the lock whatever the evidence said of the index: the evidence was read before
  // the lock, and the matcher may have indexed, confirmed and passed over the transfer since
  // (a slow RPC makes that window seconds wide); the claim would otherwise wait for a transfer
  // the matcher will never look at again.
  if (transfer.canonical && (await wasPassedOver(transaction, transfer))) {
    const paid = await recordPayments(transaction, [
      { claimId: claim.id, matchedBy: "tx_hash", transfer, verified: true },
    ]);
    if (paid.length === 1) return { type: "attached", state: "matched", signed };
  }
  return { type: "attached", state: "awaiting_confirmations", signed };
}

type TransferProblem = NotQualifyingReason | "used" | "expired" | null;

async function judgeTransfers(
  transaction: Transaction,
  deps: Pick<ServiceDeps, "config">,
  claim: ClaimToAttach,
  attach: AttachRequest,
  transfers: EvidenceTransfer[],
): Promise<{ transfer: EvidenceTransfer; problem: TransferProblem }[]> {
  const used = await paidTransfers(transaction, transfers, { orX402Authorization: true });
  const senders = await openClaimSenders(transaction, claim.id, transfers);
  const expiresAtSeconds = BigInt(Math.floor(claim.expires_at.getTime() / 1000));
  const terms = { amountDue: BigInt(claim.amount_due), payoutAddress: claim.payout_address };
  return transfers.map((transfer) => {
    const problem = (): TransferProblem => {
      if (used.has(transferKey(transfer))) return "used";
      const disqualified = disqualification(
        deps.config.claims.variant,
        PRICE_ATOMIC,
        terms,
        transfer,
      );
      if (disqualified) return disqualified;
      if (transfer.blockTimestamp > expiresAtSeconds) return "expired";
      if (attach.signer !== null) {
        return attach.signer === transfer.from ? null : "signature_not_from_sender";
      }
      const othersClaim = transfer.from !== claim.payout_address && senders.has(transfer.from);
      return othersClaim && transfer.value >= PRICE_ATOMIC ? "sender_has_open_claim" : null;
    };
    return { transfer, problem: problem() };
  });
}

const transferKey = (transfer: EvidenceTransfer) => `${transfer.txHash}:${transfer.logIndex}`;

/** Senders of the evidence that are the payout address of another open (non-x402) claim. */
async function openClaimSenders(
  transaction: Transaction,
  claimId: string,
  transfers: EvidenceTransfer[],
): Promise<Set<string>> {
  // One transaction, one block: the claims a transfer could pay by its sender are the ones open
  // when it was mined (the matcher's rule: an expired-looking claim still takes an earlier one).
  const minedAt = String(transfers[0]?.blockTimestamp ?? 0n);
  const rows = await transaction<{ payout_address: string }[]>`
    select distinct c.payout_address from app.claims c
    where c.payout_address = any(${transfers.map((transfer) => transfer.from)})
      and c.id <> ${claimId} and c.flow <> 'x402'
      and c.status in ('awaiting_payment', 'expired')
      and floor(extract(epoch from c.expires_at)) >= ${minedAt}::numeric`;
  return new Set(rows.map((row) => row.payout_address));
}

function notQualifying(reason: NotQualifyingReason): AttachRefusal {
  return { type: "tx_not_qualifying", reason };
}

async function wasPassedOver(
  transaction: Transaction,
  transfer: EvidenceTransfer,
): Promise<boolean> {
  const [row] = await transaction`
    select 1 from app.unmatched_transfers
    where tx_hash = ${transfer.txHash} and log_index = ${transfer.logIndex}`;
  return row !== undefined;
}
