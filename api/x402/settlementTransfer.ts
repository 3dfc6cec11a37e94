import { encodeEventTopics, type Hex, pad } from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { receiptOrNull, transfersToPayTo } from "../chain/transferLogs.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import type { CheckedPayment } from "./paymentPayload.ts";
import type { SettlementTransfer } from "./x402Payments.ts";

const [AUTHORIZATION_USED] = encodeEventTopics({ abi: usdcAbi, eventName: "AuthorizationUsed" });

/**
 * The transfer a settlement made, read back from the chain: from the payer, to pay_to, of the
 * price, right after the AuthorizationUsed of this payment's nonce (USDC emits them in that
 * order). Our RPC may trail the facilitator's by a moment: a missing receipt is retried briefly.
 */
export async function findSettlementTransfer(
  deps: Pick<ServiceDeps, "chain" | "config">,
  txHash: Hex,
  payment: CheckedPayment,
): Promise<SettlementTransfer | null> {
  const { chain, config } = deps;
  let receipt = await receiptOrNull(chain, txHash);
  for (let attempt = 0; !receipt && attempt < 20; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    receipt = await receiptOrNull(chain, txHash);
  }
  if (receipt?.status !== "success") return null;
  const amount = BigInt(payment.requirements.amount);
  for (const transfer of transfersToPayTo(receipt, config.chain.usdcAddress, config.chain.payTo)) {
    if (transfer.from !== payment.payer || transfer.value !== amount) continue;
    const previous = receipt.logs.find((log) => log.logIndex === transfer.logIndex - 1);
    const isOurs =
      previous?.topics[0] === AUTHORIZATION_USED &&
      previous.topics[1]?.toLowerCase() === pad(payment.payer as Hex).toLowerCase() &&
      previous.topics[2]?.toLowerCase() === payment.nonce;
    if (isOurs) {
      return {
        txHash: transfer.txHash,
        logIndex: transfer.logIndex,
        blockNumber: transfer.blockNumber,
        blockHash: transfer.blockHash,
        from: transfer.from,
        value: transfer.value,
      };
    }
  }
  return null;
}
