import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { Address, Hex } from "viem";
import { incomingTransfersByAuthorization } from "../chain/incomingTransfers.ts";
import { readIndexedBlock } from "../chain/indexedBlock.ts";
import { verifiedPrefix } from "../chain/verifyTransfers.ts";
import type { Sql } from "../db/connect.ts";
import { followSettlementTransfer } from "../lifecycle/recordPayments.ts";
import { recordLostRecord, recordStaleSettlingsUnknown } from "../lifecycle/x402Records.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { checkPaymentHeader } from "./paymentPayload.ts";
import { settlementErrorOutcome, settlementOutcome } from "./settlementOutcome.ts";
import { authorizationUsed, useOfAuthorization } from "./useOfAuthorization.ts";
import { recordSettlementFailed } from "./x402Payments.ts";
import type { X402Runtime } from "./x402Runtime.ts";

/** Settling again is not tried this close to the end of an authorization's window. */
const VALIDITY_MARGIN_SECONDS = 10n;

interface SettledPayment {
  claim_id: string;
  tx_hash: string;
  log_index: number;
  block_number: bigint;
  from_address: string;
  authorization_nonce: string;
  authorized_value: string;
  payment_header: string | null;
  settle_with_payout: boolean;
}

/**
 * An x402 claim is paid as soon as its settlement's receipt is in (one block), so that the
 * answer to the request carries the payout. This worker looks at each settlement again once it
 * should be CONFIRMATIONS deep, finding it by its EIP-3009 authorization (never by hash or log
 * index, which a reorg can change):
 * - there, canonical and deep: the payment is verified (its record follows the transfer if a
 *   reorg mined it at another place);
 * - gone, and the authorization unused on chain: the stored signed authorization is settled
 *   again while it is valid (a settle-and-pay by its payout's transaction, which the payout
 *   workers send again); once it is not, the record is `lost` (health: x402_settlement_lost):
 *   the payout went out for a payment the chain does not have, and a person must know.
 * It also closes settlements whose outcome stayed unknown: past the authorization's window
 * with the authorization unused at depth, nothing can settle it any more: the claim fails.
 */
export async function watchSettlements(deps: ServiceDeps, x402: X402Runtime): Promise<void> {
  const { sql, chain, config, logger } = deps;
  const indexed = await readIndexedBlock(sql, config.chain.chainId);
  if (indexed === null) return;
  const head = await chain.getBlockNumber({ cacheTime: 0 });
  const deepThrough = head - BigInt(config.chain.confirmations);
  const confirmedThrough = indexed < deepThrough ? indexed : deepThrough;

  // Deep by the chain's head, not by the index: whether a settlement is gone is the chain's to
  // say (the authorization unused), and settling again has a deadline (the authorization's
  // window) that an indexer re-indexing or restarting must not eat. Only verifying a
  // settlement that is there waits for the index.
  const settled = await readSettlementsToWatch(sql, deepThrough);
  for (const payment of settled) {
    // One settlement's failed RPC read must not hold back the others behind it.
    await watchSettlement(deps, x402, payment, confirmedThrough).catch((error: unknown) => {
      logger.warn(
        { claimId: payment.claim_id, error: (error as Error).message },
        "x402 settlement watcher could not look at a settlement this round",
      );
    });
  }

  await failExpiredUnknowns(deps, deepThrough);
}

/** One settled payment's look, once it should be CONFIRMATIONS deep (see watchSettlements). */
async function watchSettlement(
  deps: ServiceDeps,
  x402: X402Runtime,
  payment: SettledPayment,
  confirmedThrough: bigint,
): Promise<void> {
  const { sql, chain, config, logger } = deps;
  const candidates = await incomingTransfersByAuthorization(
    sql,
    payment.from_address,
    payment.authorization_nonce,
  );
  // Only the verified authorization is the settlement: the payer can spend the same nonce on
  // another transfer of its own (DESIGN.md §12).
  let canonical: (typeof candidates)[number] | undefined;
  let spentElsewhere: (typeof candidates)[number] | undefined;
  for (const candidate of candidates) {
    const ok = await verifiedPrefix(chain, config.chain.usdcAddress, config.chain.payTo, [
      candidate,
    ]);
    if (ok !== 1) continue;
    if (candidate.value === BigInt(payment.authorized_value)) canonical = candidate;
    else spentElsewhere = candidate;
  }
  if (!canonical && spentElsewhere) {
    if (spentElsewhere.blockNumber > confirmedThrough) return;
    // The settlement was undone and another use of its nonce took its place: the verified
    // authorization can never be settled again, and the payout went out.
    await recordLost(deps, x402, payment, "authorization spent by another transfer");
    return;
  }
  if (canonical) {
    if (canonical.blockNumber > confirmedThrough) return;
    const moved = canonical.txHash !== payment.tx_hash || canonical.logIndex !== payment.log_index;
    await followSettlementTransfer(sql, payment.claim_id, canonical);
    if (moved) {
      logger.warn(
        { claimId: payment.claim_id, txHash: canonical.txHash, logIndex: canonical.logIndex },
        "x402 settlement found again elsewhere after a reorg; its payment record follows it",
      );
    }
    return;
  }
  const token = { usdc: config.chain.usdcAddress, payTo: config.chain.payTo };
  const authorization = {
    payer: payment.from_address as Address,
    nonce: payment.authorization_nonce as Hex,
    value: BigInt(payment.authorized_value),
  };
  if (await authorizationUsed(chain, token.usdc, authorization)) {
    // Used, and already at depth where the index has read every transfer to pay_to, yet no
    // transfer to pay_to carries it: the nonce went to a cancellation or to a transfer
    // elsewhere, and can never settle. Otherwise: not indexed (or not deep) yet, next round.
    const usedAtDepth =
      confirmedThrough >= 0n &&
      (await authorizationUsed(chain, token.usdc, authorization, confirmedThrough));
    if (
      usedAtDepth &&
      candidates.length === 0 &&
      (await useOfAuthorization(chain, token, authorization, confirmedThrough)) === "elsewhere"
    ) {
      await recordLost(deps, x402, payment, "authorization used elsewhere than pay_to");
    }
    return;
  }
  await settleAgainOrLose(deps, x402, payment);
}

async function settleAgainOrLose(
  deps: ServiceDeps,
  x402: X402Runtime,
  payment: SettledPayment,
): Promise<void> {
  const { logger } = deps;
  const validBefore = payment.payment_header ? validBeforeOf(payment.payment_header) : null;
  const now = BigInt(Math.floor(Date.now() / 1000));
  if (
    payment.payment_header &&
    validBefore !== null &&
    now + VALIDITY_MARGIN_SECONDS < validBefore
  ) {
    if (payment.settle_with_payout) {
      // Settled in its payout's transaction (docs/payments.md#one-transaction-settlement): the
      // payout workers send those very bytes again (watchMinedPayouts.ts), and they settle it.
      // A settlement of the facilitator's own would only race them.
      logger.warn(
        { claimId: payment.claim_id },
        "x402 settle-and-pay dropped out of the chain; its payout's transaction is sent again",
      );
      return;
    }
    const terms = await x402.terms();
    const checked = checkPaymentHeader(payment.payment_header, terms);
    if (checked.ok) {
      const signed = checked.payment.payload.payload as { signature?: string };
      if (signed.signature) x402.facilitator.forgetPendingSettlement(signed.signature);
      x402.facilitator.resetNonces();
      const outcome = await x402.facilitator.client
        .settle(checked.payment.payload, checked.payment.requirements)
        .then(settlementOutcome, settlementErrorOutcome);
      if (outcome.kind !== "settled") x402.facilitator.resetNonces();
      logger.warn(
        {
          claimId: payment.claim_id,
          outcome: outcome.kind,
          ...("detail" in outcome ? { detail: outcome.detail } : {}),
        },
        "x402 settlement dropped out of the chain; settled its authorization again",
      );
      return;
    }
  }
  await recordLost(deps, x402, payment, "settlement dropped out of the chain");
}

/** The payout went out for a settlement the chain no longer has, for good: a person must know. */
async function recordLost(
  deps: ServiceDeps,
  x402: X402Runtime,
  payment: SettledPayment,
  reason: string,
): Promise<void> {
  // The facilitator's nonces counted the dropped settlement: start again from the chain's, or
  // the next settlement waits behind a gap nobody fills.
  x402.facilitator.resetNonces();
  await recordLostRecord(deps.sql, payment.claim_id, reason);
  deps.logger.error(
    { claimId: payment.claim_id, reason },
    "x402 settlement dropped out of the chain and its authorization can no longer be settled; the payout went out: it needs a person",
  );
}

/**
 * Unknown outcomes whose authorization can no longer be used: nothing will ever pay them.
 * Records a dead process left `settling` are unknown first.
 */
async function failExpiredUnknowns(deps: ServiceDeps, deepThrough: bigint): Promise<void> {
  const abandoned = await recordStaleSettlingsUnknown(deps.sql, deps.config.x402.settleTimeoutMs);
  if (abandoned.length > 0) {
    deps.logger.warn(
      { claimIds: abandoned },
      "x402 settlements left settling by a process that died: their outcome is unknown; the chain decides",
    );
  }
  const unknown = await readUnknownSettlements(deps.sql);
  if (unknown.length === 0 || deepThrough < 0n) return;
  const [deepBlock] = await Promise.all([deps.chain.getBlock({ blockNumber: deepThrough })]);
  for (const record of unknown) {
    const validBefore = record.payment_header ? validBeforeOf(record.payment_header) : null;
    if (validBefore === null || deepBlock.timestamp <= validBefore) continue;
    const authorization = { payer: record.payer as Address, nonce: record.nonce as Hex };
    if (
      await authorizationUsed(deps.chain, deps.config.chain.usdcAddress, authorization, deepThrough)
    ) {
      continue;
    }
    await recordSettlementFailed(deps.sql, record.claim_id, "authorization_expired_unsettled");
    deps.logger.warn(
      { claimId: record.claim_id },
      "x402 settlement outcome was unknown and its authorization expired unused: the claim fails",
    );
  }
}

function validBeforeOf(header: string): bigint | null {
  try {
    const decoded = decodePaymentSignatureHeader(header) as {
      payload?: { authorization?: { validBefore?: string } };
    };
    const value = decoded.payload?.authorization?.validBefore;
    return value === undefined ? null : BigInt(value);
  } catch {
    return null;
  }
}

export function createSettlementWatcher(deps: ServiceDeps, x402: X402Runtime): Worker {
  return {
    name: "x402-settlement-watcher",
    lockKey: LOCK_KEYS.x402SettlementWatcher,
    intervalMs: 1_000,
    tick: async () => {
      await watchSettlements(deps, x402);
      return false;
    },
  };
}

/**
 * x402 payments settled at `deepThrough` or before and not yet verified there, oldest first.
 * Read every second: by the partial index `payments_x402_unverified` (migration 0031), never
 * every payment ever made.
 */
export function readSettlementsToWatch(sql: Sql, deepThrough: bigint) {
  return sql<SettledPayment[]>`
    select p.claim_id, p.tx_hash, p.log_index, p.block_number, p.from_address,
      p.authorization_nonce, x.authorized_value::text, x.payment_header, x.settle_with_payout
    from app.payments p join app.x402_payments x on x.claim_id = p.claim_id
    where p.matched_by = 'x402' and p.verified_at is null and x.status <> 'lost'
      and p.authorization_nonce is not null and p.block_number <= ${String(deepThrough)}
    order by p.block_number
    limit 50`;
}

/**
 * x402 records whose settlement's outcome is unknown, with the header to look it up by, oldest
 * first: by the partial index `x402_payments_unsettled` (migration 0031).
 */
export function readUnknownSettlements(sql: Sql) {
  return sql<{ claim_id: string; payer: string; nonce: string; payment_header: string | null }[]>`
    select claim_id, payer, nonce, payment_header from app.x402_payments
    where status = 'unknown' and payment_header is not null
    order by updated_at limit 50`;
}
