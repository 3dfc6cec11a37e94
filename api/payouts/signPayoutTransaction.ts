import {
  type Address,
  encodeFunctionData,
  type Hex,
  type PrivateKeyAccount,
  parseTransaction,
} from "viem";
import { settleAndPayAbi } from "../../contracts-abi/settleAndPay.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";
import { keccak256 } from "../signing/keccak256.ts";
import type { PayoutFees } from "./payoutFees.ts";

export interface SignedTransaction {
  rawTx: Hex;
  txHash: Hex;
}

export interface PayoutTransaction {
  chainId: number;
  usdc: Address;
  nonce: bigint;
  gas: bigint;
  /** `transfer(recipient, amount)` on the token. */
  recipient: Address;
  amount: bigint;
}

/** Signs, locally, the EIP-1559 USDC transfer of one payout. Nothing leaves the process. */
export async function signPayoutTransaction(
  account: PrivateKeyAccount,
  payout: PayoutTransaction,
  fees: PayoutFees,
): Promise<SignedTransaction> {
  return signTransfer(account, {
    chainId: payout.chainId,
    to: payout.usdc,
    nonce: payout.nonce,
    gas: payout.gas,
    data: encodeFunctionData({
      abi: usdcAbi,
      functionName: "transfer",
      args: [payout.recipient, payout.amount],
    }),
    fees,
  });
}

/** One payout that also settles its claim's authorization (docs/payments.md#one-transaction-settlement). */
export interface SettleAndPayTransaction extends PayoutTransaction {
  /** The SettleAndPay contract: the transaction goes to it, not to the token. */
  contract: Address;
  authorization: {
    from: Address;
    to: Address;
    value: bigint;
    validAfter: bigint;
    validBefore: bigint;
    nonce: Hex;
    signature: Hex;
  };
}

/**
 * Signs, locally, the EIP-1559 call of SettleAndPay: the authorization's transfer to pay_to and
 * the payout from this wallet's allowance, both or neither. One more transaction in the payout
 * nonce sequence; its replacements keep its calldata (signReplacement).
 */
export async function signSettleAndPayTransaction(
  account: PrivateKeyAccount,
  payout: SettleAndPayTransaction,
  fees: PayoutFees,
): Promise<SignedTransaction> {
  return signTransfer(account, {
    chainId: payout.chainId,
    to: payout.contract,
    nonce: payout.nonce,
    gas: payout.gas,
    data: encodeFunctionData({
      abi: settleAndPayAbi,
      functionName: "settleAndPay",
      args: [payout.usdc, payout.authorization, payout.recipient, payout.amount],
    }),
    fees,
  });
}

/**
 * The same transaction as `rawTx` (chain, nonce, token, calldata, gas), with new fees: a
 * same-nonce replacement can only ever do what the original would have done.
 */
export async function signReplacement(
  account: PrivateKeyAccount,
  rawTx: Hex,
  fees: PayoutFees,
): Promise<SignedTransaction> {
  const original = parseTransaction(rawTx);
  if (
    original.type !== "eip1559" ||
    original.chainId === undefined ||
    original.nonce === undefined ||
    original.to == null ||
    original.data === undefined ||
    original.gas === undefined
  ) {
    throw new Error("The payout transaction to replace is not a complete EIP-1559 transaction");
  }
  return signTransfer(account, {
    chainId: original.chainId,
    to: original.to,
    nonce: BigInt(original.nonce),
    gas: original.gas,
    data: original.data,
    fees,
  });
}

async function signTransfer(
  account: PrivateKeyAccount,
  transaction: {
    chainId: number;
    to: Address;
    nonce: bigint;
    gas: bigint;
    data: Hex;
    fees: PayoutFees;
  },
): Promise<SignedTransaction> {
  const rawTx = await account.signTransaction({
    type: "eip1559",
    chainId: transaction.chainId,
    nonce: Number(transaction.nonce),
    to: transaction.to,
    data: transaction.data,
    gas: transaction.gas,
    value: 0n,
    maxFeePerGas: transaction.fees.maxFeePerGas,
    maxPriorityFeePerGas: transaction.fees.maxPriorityFeePerGas,
  });
  return { rawTx, txHash: keccak256(rawTx) };
}
