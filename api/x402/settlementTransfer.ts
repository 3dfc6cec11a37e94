import type { Hex } from "viem";
import { receiptWithin, transfersToPayTo } from "../chain/transferLogs.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import type { CheckedPayment } from "./paymentPayload.ts";
import type { SettlementTransfer } from "./x402Payments.ts";

/**
 * The transfer a settlement made, read back from the chain: from the payer, to pay_to, of the
 * price, with this payment's EIP-3009 nonce. Our RPC may trail the facilitator's by a moment:
 * a missing receipt is retried briefly.
 */
export async function findSettlementTransfer(
  deps: Pick<ServiceDeps, "chain" | "config">,
  txHash: Hex,
  payment: CheckedPayment,
): Promise<SettlementTransfer | null> {
  const { chain, config } = deps;
  const receipt = await receiptWithin(chain, txHash, { waitMs: 2_000, pollMs: 100 });
  if (receipt?.status !== "success") return null;
  const amount = BigInt(payment.requirements.amount);
  const transfer = transfersToPayTo(receipt, config.chain.usdcAddress, config.chain.payTo).find(
    (candidate) =>
      candidate.from === payment.payer &&
      candidate.value === amount &&
      candidate.authorizationNonce === payment.nonce,
  );
  if (!transfer) return null;
  return {
    txHash: transfer.txHash,
    logIndex: transfer.logIndex,
    blockNumber: transfer.blockNumber,
    blockHash: transfer.blockHash,
    from: transfer.from,
    value: transfer.value,
    transferOrdinal: transfer.transferOrdinal,
    authorizationNonce: payment.nonce,
  };
}
