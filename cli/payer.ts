import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  formatEther,
  type Hex,
  http,
  type PublicClient,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { formatUsdc } from "../api/money.ts";
import type { offerResponse } from "../api/schemas/responses.ts";
import { usdcAbi } from "../contracts-abi/usdc.ts";
import { CliError, reasonOfError } from "./errors.ts";

type Offer = import("zod").output<typeof offerResponse>;

/**
 * The paying wallet: its key comes only from PAYER_PRIVATE_KEY (a flag would land in the shell's
 * history and in `ps`), never from the command line.
 */
export function payerAccount(env: NodeJS.ProcessEnv = process.env): PrivateKeyAccount {
  const key = env.PAYER_PRIVATE_KEY?.trim();
  if (!key) {
    throw new CliError(
      "no_key",
      "no_key: set PAYER_PRIVATE_KEY to the paying wallet's private key (0x and 64 hex digits); a key is never taken as a flag",
      2,
    );
  }
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) {
    throw new CliError(
      "invalid_key",
      "invalid_key: PAYER_PRIVATE_KEY is not a private key (0x and 64 hex digits)",
      2,
    );
  }
  return privateKeyToAccount(key as Hex);
}

/** --rpc, else PAYER_RPC_URL, else Base's public RPC when the offer is on Base. */
export function payerRpcUrl(option: string | undefined, offer: Offer): string | undefined {
  const url = option ?? process.env.PAYER_RPC_URL;
  if (url) {
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      throw new CliError("invalid_option", `invalid_option: --rpc ${url} is not an http(s) URL`, 2);
    }
    return url;
  }
  return offer.chain_id === 8453 ? "https://mainnet.base.org" : undefined;
}

export interface PayerChain {
  rpcUrl: string;
  publicClient: PublicClient;
  wallet: ReturnType<typeof walletFor>;
}

function walletFor(account: PrivateKeyAccount, rpcUrl: string, offer: Offer) {
  return createWalletClient({ account, chain: chainOf(rpcUrl, offer), transport: http(rpcUrl) });
}

function chainOf(rpcUrl: string, offer: Offer) {
  return defineChain({
    id: offer.chain_id,
    name: offer.network,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export function payerChain(account: PrivateKeyAccount, rpcUrl: string, offer: Offer): PayerChain {
  return {
    rpcUrl,
    publicClient: createPublicClient({
      chain: chainOf(rpcUrl, offer),
      transport: http(rpcUrl, { retryCount: 1 }),
      pollingInterval: 500,
    }) as PublicClient,
    wallet: walletFor(account, rpcUrl, offer),
  };
}

export interface WalletFunds {
  address: Address;
  usdc: bigint;
  eth: bigint;
}

/**
 * The RPC must serve the offer's chain (a transfer on another chain pays nothing here), and the
 * wallet must hold `needed` USDC and some ETH for gas: checked before anything is signed.
 */
export async function checkWallet(
  chain: PayerChain,
  address: Address,
  offer: Offer,
  needed: bigint,
  options: { needsGas: boolean },
): Promise<WalletFunds> {
  let chainId: number;
  try {
    chainId = await chain.publicClient.getChainId();
  } catch (error) {
    throw new CliError(
      "rpc_unreachable",
      `rpc_unreachable: the RPC at ${chain.rpcUrl} does not answer (${reasonOfError(error)}); pass --rpc`,
    );
  }
  if (chainId !== offer.chain_id) {
    throw new CliError(
      "wrong_network",
      `wrong_network: the RPC at ${chain.rpcUrl} serves chain ${chainId}, but the service takes payments on ${offer.network} (chain ${offer.chain_id}); nothing was sent`,
    );
  }
  const [usdc, eth] = await Promise.all([
    chain.publicClient.readContract({
      address: offer.usdc_contract as Address,
      abi: usdcAbi,
      functionName: "balanceOf",
      args: [address],
    }),
    chain.publicClient.getBalance({ address }),
  ]);
  if (usdc < needed) {
    throw new CliError(
      "insufficient_usdc",
      `insufficient_usdc: ${address} holds ${formatUsdc(usdc)} USDC on ${offer.network}, the payment needs ${formatUsdc(needed)}; nothing was sent`,
    );
  }
  if (options.needsGas && eth === 0n) {
    throw new CliError(
      "insufficient_eth",
      `insufficient_eth: ${address} holds no ETH on ${offer.network} to pay the transfer's gas; nothing was sent`,
    );
  }
  return { address, usdc, eth };
}

export function describeFunds(funds: WalletFunds, offer: Offer): string {
  return `Wallet ${funds.address} holds ${formatUsdc(funds.usdc)} USDC and ${formatEther(funds.eth)} ETH on ${offer.network} (chain ${offer.chain_id})`;
}
