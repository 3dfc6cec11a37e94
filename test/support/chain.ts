import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  publicActions,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import {
  accountWithRole,
  type DevnetAccount,
  devnetAccounts,
} from "../../scripts/devnet/accounts.ts";
import { type RunningAnvil, startAnvil } from "../../scripts/devnet/anvil.ts";
import { prepareDevnetChain } from "../../scripts/devnet/prepareChain.ts";

/** A devnet chain of the test file's own: Anvil on a free port, USDC placed, accounts funded. */
export async function startTestChain(options: { blockTimeSeconds?: number } = {}) {
  const anvil: RunningAnvil = await startAnvil({
    port: 0,
    chainId: base.id,
    blockTimeSeconds: options.blockTimeSeconds,
  });
  const accounts = devnetAccounts();
  await prepareDevnetChain(anvil.rpcUrl, accounts, { forked: false });
  const chain = { ...base, rpcUrls: { default: { http: [anvil.rpcUrl] } } };
  const publicClient = createPublicClient({
    chain,
    transport: http(anvil.rpcUrl),
    pollingInterval: 50,
  });
  const testClient = createTestClient({
    chain,
    mode: "anvil",
    transport: http(anvil.rpcUrl),
  }).extend(publicActions);
  const users = accounts.filter((account) => account.role === "user");

  function walletFor(account: DevnetAccount) {
    return createWalletClient({
      chain,
      account: privateKeyToAccount(account.privateKey),
      transport: http(anvil.rpcUrl),
    });
  }

  /** Sends USDC and returns once the transfer is mined (its receipt is successful). */
  async function transferUsdc(from: DevnetAccount, to: Address, amount: bigint): Promise<Hex> {
    const hash = await walletFor(from).writeContract({
      address: BASE_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "transfer",
      args: [to, amount],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`USDC transfer ${hash} reverted`);
    return hash;
  }

  /**
   * A USDC transfer signed but not sent: bytes to hand to anvil_reorg (which puts them in the
   * new blocks) or to send later.
   */
  async function signedUsdcTransfer(
    from: DevnetAccount,
    to: Address,
    amount: bigint,
  ): Promise<Hex> {
    const wallet = walletFor(from);
    const request = await wallet.prepareTransactionRequest({
      to: BASE_USDC_ADDRESS,
      data: encodeFunctionData({ abi: usdcAbi, functionName: "transfer", args: [to, amount] }),
      gas: 100_000n,
    });
    return wallet.signTransaction(request);
  }

  /** USDC held by `address`, from the chain. */
  function usdcBalance(address: Address): Promise<bigint> {
    return publicClient.readContract({
      address: BASE_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [address],
    });
  }

  /** The `index`th funded user account (1,000 USDC, 10 ETH each). */
  function user(index: number): DevnetAccount {
    const account = users[index];
    if (!account) throw new Error(`the devnet has no user ${index}`);
    return account;
  }

  return {
    anvil,
    rpcUrl: anvil.rpcUrl,
    accounts,
    users,
    user,
    payTo: accountWithRole(accounts, "pay_to"),
    payout: accountWithRole(accounts, "payout"),
    receiptSigner: accountWithRole(accounts, "receipt_signer"),
    facilitator: accountWithRole(accounts, "facilitator"),
    publicClient,
    testClient,
    walletFor,
    transferUsdc,
    signedUsdcTransfer,
    usdcBalance,
    stop: () => anvil.stop(),
  };
}

export type TestChain = Awaited<ReturnType<typeof startTestChain>>;
