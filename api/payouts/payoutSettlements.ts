import { encodePaymentResponseHeader } from "@x402/core/http";
import { type Address, getAddress, type Hex, type PublicClient } from "viem";
import { receiptOrNull, transfersToPayTo } from "../chain/transferLogs.ts";
import type { Sql } from "../db/connect.ts";
import type { SettlementTransfer } from "../x402/x402Payments.ts";

/** What a mined settle-and-pay payout settled: its claim's payment and the PAYMENT-RESPONSE. */
export interface PayoutSettlement {
  claimId: string;
  paymentResponse: string;
  transfer: SettlementTransfer;
}

/**
 * For settle-and-pay payouts mined successfully (docs/payments.md#one-transaction-settlement):
 * the transfer to pay_to their transaction made with the claim's verified authorization (the
 * same payer, nonce and value), read from its receipt. A payout whose receipt or transfer cannot
 * be read now is absent: its outcome is stored in a later round, never without its payment.
 */
export async function readPayoutSettlements(
  sql: Sql,
  rpc: PublicClient,
  chain: { usdc: Address; payTo: Address; network: `${string}:${string}` },
  mined: { claimId: string; txHash: Hex }[],
): Promise<Map<string, PayoutSettlement>> {
  const settlements = new Map<string, PayoutSettlement>();
  if (mined.length === 0) return settlements;
  const authorizations = await sql<
    { claim_id: string; payer: string; nonce: string; authorized_value: string }[]
  >`
    select claim_id, payer, nonce, authorized_value::text from app.x402_payments
    where claim_id = any(${mined.map((payout) => payout.claimId)}::text[])`;
  const byClaim = new Map(authorizations.map((row) => [row.claim_id, row]));
  await Promise.all(
    mined.map(async ({ claimId, txHash }) => {
      const authorization = byClaim.get(claimId);
      if (!authorization) return;
      const receipt = await receiptOrNull(rpc, txHash).catch(() => null);
      if (receipt?.status !== "success") return;
      const transfer = transfersToPayTo(receipt, chain.usdc, chain.payTo).find(
        (candidate) =>
          candidate.from === authorization.payer &&
          candidate.authorizationNonce === authorization.nonce &&
          candidate.value === BigInt(authorization.authorized_value),
      );
      if (!transfer) return;
      settlements.set(claimId, {
        claimId,
        paymentResponse: encodePaymentResponseHeader({
          success: true,
          transaction: transfer.txHash,
          network: chain.network,
          payer: getAddress(authorization.payer),
        }),
        transfer: {
          txHash: transfer.txHash,
          logIndex: transfer.logIndex,
          blockNumber: transfer.blockNumber,
          blockHash: transfer.blockHash,
          from: transfer.from,
          value: transfer.value,
          transferOrdinal: transfer.transferOrdinal,
          authorizationNonce: authorization.nonce,
        },
      });
    }),
  );
  return settlements;
}
