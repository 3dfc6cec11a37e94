import { type Address, encodeFunctionData, type Hex, parseGwei, parseSignature, toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import type { DevnetAccount } from "../../scripts/devnet/accounts.ts";
import type { TestChain } from "./chain.ts";

export const transferWithAuthorizationTypes = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

/** An EIP-3009 authorization as its signer signed it: what the token checks. */
export interface SignedAuthorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  v: number;
  r: Hex;
  s: Hex;
}

/** `from` signs a TransferWithAuthorization to `to` for `value` (a fresh nonce unless given). */
export async function signTransferAuthorization(
  from: { address: Address; privateKey: Hex },
  to: Address,
  value: bigint,
  options: { nonce?: Hex; validBefore?: bigint } = {},
): Promise<SignedAuthorization> {
  const nonce = options.nonce ?? toHex(crypto.getRandomValues(new Uint8Array(32)));
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    from: from.address,
    to,
    value,
    validAfter: 0n,
    validBefore: options.validBefore ?? now + 3600n,
    nonce,
  };
  const signature = await privateKeyToAccount(from.privateKey).signTypedData({
    domain: {
      name: "USD Coin",
      version: "2",
      chainId: base.id,
      verifyingContract: BASE_USDC_ADDRESS,
    },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message,
  });
  const { v, r, s } = parseSignature(signature);
  return { ...message, v: Number(v), r, s };
}

/** `submitter` sends a signed authorization to the token; returns the hash, not waiting. */
export function submitAuthorization(
  chain: TestChain,
  submitter: DevnetAccount,
  authorization: SignedAuthorization,
  fees: { maxPriorityFeePerGas?: bigint; maxFeePerGas?: bigint } = {},
): Promise<Hex> {
  const { from, to, value, validAfter, validBefore, nonce, v, r, s } = authorization;
  return chain.walletFor(submitter).writeContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [from, to, value, validAfter, validBefore, nonce, v, r, s],
    gas: 150_000n,
    ...fees,
  });
}

/**
 * `submitter`'s transaction sending a signed authorization to the token, signed and not sent
 * (for a reorg's new branch).
 */
export async function signedAuthorizationCall(
  chain: TestChain,
  submitter: DevnetAccount,
  authorization: SignedAuthorization,
): Promise<Hex> {
  const { from, to, value, validAfter, validBefore, nonce, v, r, s } = authorization;
  const wallet = chain.walletFor(submitter);
  const request = await wallet.prepareTransactionRequest({
    to: BASE_USDC_ADDRESS,
    data: encodeFunctionData({
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args: [from, to, value, validAfter, validBefore, nonce, v, r, s],
    }),
    gas: 150_000n,
    maxFeePerGas: parseGwei("100"),
    maxPriorityFeePerGas: parseGwei("50"),
  });
  return wallet.signTransaction(request);
}

/**
 * `from` signs an EIP-3009 authorization and `submitter` sends it to the token, as an x402
 * facilitator would. Returns the transaction hash (mined) and the nonce.
 */
export async function transferWithAuthorization(
  chain: TestChain,
  from: DevnetAccount,
  submitter: DevnetAccount,
  to: Address,
  value: bigint,
): Promise<{ hash: Hex; nonce: Hex }> {
  const authorization = await signTransferAuthorization(from, to, value);
  const hash = await submitAuthorization(chain, submitter, authorization);
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`transferWithAuthorization ${hash} reverted`);
  return { hash, nonce: authorization.nonce };
}
