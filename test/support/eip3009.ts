import { type Address, type Hex, parseSignature, toHex } from "viem";
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
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    from: from.address,
    to,
    value,
    validAfter: 0n,
    validBefore: now + 3600n,
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
  const hash = await chain.walletFor(submitter).writeContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [from.address, to, value, 0n, message.validBefore, nonce, Number(v), r, s],
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`transferWithAuthorization ${hash} reverted`);
  return { hash, nonce };
}
