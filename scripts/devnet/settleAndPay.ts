import {
  type Account,
  type Address,
  type Client,
  getContractAddress,
  type Hex,
  maxUint256,
  type PublicClient,
  parseAbi,
  parseSignature,
  type Transport,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { settleAndPayArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole, type DevnetAccount } from "./accounts.ts";

/**
 * Where the devnet's SettleAndPay lives: the deployer's first contract. A fresh devnet chain
 * deploys it there with the deployer's first transaction; on a fork (where the deployer's key
 * has a history), its runtime code is placed there instead (its constructor is empty).
 */
export function devnetSettleAndPayAddress(accounts: DevnetAccount[]): Address {
  return getContractAddress({ from: accountWithRole(accounts, "deployer").address, nonce: 0n });
}

const permitAbi = parseAbi([
  "function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)",
  "function nonces(address owner) view returns (uint256)",
]);

/**
 * The payout wallet's allowance to SettleAndPay, granted the way an operator does it on Base
 * (docs/operating.md#settleandpay-on-base): an EIP-2612 permit the payout key signs offline and
 * another account submits, so the payout wallet's nonce sequence is never touched.
 */
export async function signPayoutPermit(
  payoutPrivateKey: Hex,
  spender: Address,
  options: { chainId: number; permitNonce: bigint; value?: bigint; deadline?: bigint },
) {
  const owner = privateKeyToAccount(payoutPrivateKey);
  const value = options.value ?? maxUint256;
  const deadline = options.deadline ?? maxUint256;
  const signature = await owner.signTypedData({
    domain: {
      name: "USD Coin",
      version: "2",
      chainId: options.chainId,
      verifyingContract: BASE_USDC_ADDRESS,
    },
    types: {
      Permit: [
        { name: "owner", type: "address" },
        { name: "spender", type: "address" },
        { name: "value", type: "uint256" },
        { name: "nonce", type: "uint256" },
        { name: "deadline", type: "uint256" },
      ],
    },
    primaryType: "Permit",
    message: { owner: owner.address, spender, value, nonce: options.permitNonce, deadline },
  });
  const { v, r, s } = parseSignature(signature);
  return { owner: owner.address, spender, value, deadline, v: Number(v), r, s };
}

/**
 * Deploys SettleAndPay (or places it, on a fork) and gives it the payout wallet's allowance.
 * Returns the transactions to wait for.
 */
export async function setUpDevnetSettleAndPay(
  client: PublicClient & Pick<Client, "request">,
  deployer: WalletClient<Transport, undefined, Account>,
  accounts: DevnetAccount[],
  options: { forked: boolean; deployerNonce: number; chainId: number },
): Promise<{ hashes: Hex[]; nextDeployerNonce: number }> {
  const address = devnetSettleAndPayAddress(accounts);
  let nonce = options.deployerNonce;
  const hashes: Hex[] = [];
  if (options.forked || nonce !== 0) {
    await client.request<{ Parameters: [Address, Hex]; ReturnType: null }>({
      method: "anvil_setCode",
      params: [address, settleAndPayArtifact.deployedBytecode],
    });
  } else {
    hashes.push(
      await deployer.deployContract({
        abi: settleAndPayArtifact.abi,
        bytecode: settleAndPayArtifact.bytecode,
        nonce: nonce++,
        gas: 500_000n,
        chain: null,
      }),
    );
  }
  const payout = accountWithRole(accounts, "payout");
  const permit = await signPayoutPermit(payout.privateKey, address, {
    chainId: options.chainId,
    permitNonce: await client.readContract({
      address: BASE_USDC_ADDRESS,
      abi: permitAbi,
      functionName: "nonces",
      args: [payout.address],
    }),
  });
  hashes.push(
    await deployer.writeContract({
      chain: null,
      address: BASE_USDC_ADDRESS,
      abi: permitAbi,
      functionName: "permit",
      args: [
        permit.owner,
        permit.spender,
        permit.value,
        permit.deadline,
        permit.v,
        permit.r,
        permit.s,
      ],
      nonce: nonce++,
      gas: 150_000n,
    }),
  );
  return { hashes, nextDeployerNonce: nonce };
}
