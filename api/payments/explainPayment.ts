import type { Hex } from "viem";
import { incomingTransfersInTx } from "../chain/incomingTransfers.ts";
import { ChainReadsBusy, type PublicChainReads } from "../chain/publicChainReads.ts";
import { transfersToPayTo } from "../chain/transferLogs.ts";
import type { UnmatchedReason } from "../reasons/reasonCatalog.ts";
import { type InvalidRequest, invalidField } from "../reasons/refusal.ts";
import { txHashInput } from "../schemas/inputs.ts";
import type { ServiceDeps } from "../serviceDeps.ts";

export type TransferState =
  | "paid_claim"
  | "unmatched"
  | "awaiting_confirmations"
  | "not_indexed_yet";

export interface TransferExplanation {
  logIndex: number;
  from: string;
  value: bigint;
  blockNumber: bigint;
  /** Blocks on top of the transfer's block, counting from 0; null when the RPC is down. */
  confirmations: number | null;
  state: TransferState;
  claimId: string | null;
  claimStatus: string | null;
  matchedBy: string | null;
  reason: UnmatchedReason | null;
}

export interface PaymentExplanation {
  txHash: Hex;
  /** The transaction reverted: it moved no USDC. */
  reverted: boolean;
  transfers: TransferExplanation[];
}

export type ExplainPaymentResult =
  | ({ type: "explained" } & PaymentExplanation)
  | { type: "tx_not_found" }
  | { type: "temporarily_unavailable"; retryAfterSeconds: number }
  | InvalidRequest;

/**
 * "What happened to my payment?" (GET /api/payments/{tx_hash} and every surface that asks):
 * for each USDC transfer to pay_to in a transaction, whether it paid a claim (which, by which
 * rule), is still confirming, or paid nothing and why.
 */
export async function explainPayment(
  deps: Pick<ServiceDeps, "sql" | "config"> & { reads: PublicChainReads },
  txHashText: string,
): Promise<ExplainPaymentResult> {
  const parsed = txHashInput.safeParse(txHashText);
  if (!parsed.success) {
    return invalidField("tx_hash", "must be a transaction hash: 0x and 64 hex digits");
  }
  const txHash = parsed.data;
  const explained = (transfers: TransferExplanation[], reverted = false) =>
    ({ type: "explained", txHash, reverted, transfers }) as const;
  const { sql, reads, config } = deps;
  const hash = txHash.toLowerCase();
  const head = await reads.head().catch(() => null);
  const confirmationsOf = (block: bigint) =>
    head === null ? null : Math.max(0, Number(head - block));

  const indexed = await incomingTransfersInTx(sql, hash);
  if (indexed.length === 0) {
    let receipt: Awaited<ReturnType<PublicChainReads["receipt"]>>;
    try {
      receipt = await reads.receipt(hash as Hex);
    } catch (error) {
      if (error instanceof ChainReadsBusy) {
        return { type: "temporarily_unavailable", retryAfterSeconds: 1 };
      }
      throw error;
    }
    if (!receipt) return { type: "tx_not_found" };
    if (receipt.status !== "success") return explained([], true);
    return explained(
      transfersToPayTo(receipt, config.chain.usdcAddress, config.chain.payTo).map((transfer) => ({
        logIndex: transfer.logIndex,
        from: transfer.from,
        value: transfer.value,
        blockNumber: transfer.blockNumber,
        confirmations: confirmationsOf(transfer.blockNumber),
        state: "not_indexed_yet",
        claimId: null,
        claimStatus: null,
        matchedBy: null,
        reason: null,
      })),
    );
  }

  const [paid, unmatched] = await Promise.all([
    sql<{ log_index: number; claim_id: string; matched_by: string; status: string }[]>`
      select p.log_index, p.claim_id, p.matched_by, c.status
      from app.payments p join app.claims c on c.id = p.claim_id
      where p.tx_hash = ${hash}`,
    sql<
      {
        log_index: number;
        reason: UnmatchedReason;
        claim_id: string | null;
        status: string | null;
      }[]
    >`
      select u.log_index, u.reason, u.claim_id, c.status
      from app.unmatched_transfers u left join app.claims c on c.id = u.claim_id
      where u.tx_hash = ${hash}`,
  ]);
  return explained(
    indexed.map((transfer) => {
      const payment = paid.find((row) => row.log_index === transfer.logIndex);
      const miss = unmatched.find((row) => row.log_index === transfer.logIndex);
      return {
        logIndex: transfer.logIndex,
        from: transfer.from,
        value: transfer.value,
        blockNumber: transfer.blockNumber,
        confirmations: confirmationsOf(transfer.blockNumber),
        state: payment ? "paid_claim" : miss ? "unmatched" : "awaiting_confirmations",
        claimId: payment?.claim_id ?? miss?.claim_id ?? null,
        claimStatus: payment?.status ?? miss?.status ?? null,
        matchedBy: payment?.matched_by ?? null,
        reason: miss?.reason ?? null,
      };
    }),
  );
}
