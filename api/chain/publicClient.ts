import { createPublicClient, defineChain, http, type PublicClient } from "viem";
import { base } from "viem/chains";

export function chainDefinition(chainId: number, rpcUrl: string) {
  const known = chainId === base.id ? base : undefined;
  return defineChain({
    ...(known ?? { name: `chain ${chainId}`, nativeCurrency: base.nativeCurrency }),
    id: chainId,
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

/**
 * Reads from the configured RPC. Short timeouts: a hung RPC must show up as an error in
 * health and in the workers' backoff, not as a request that never returns.
 */
export function createChainReader(
  rpcUrl: string,
  chainId: number,
  options: { timeoutMs?: number; pollingIntervalMs?: number } = {},
): PublicClient {
  return createPublicClient({
    chain: chainDefinition(chainId, rpcUrl),
    transport: http(rpcUrl, { timeout: options.timeoutMs ?? 5_000, retryCount: 1 }),
    pollingInterval: options.pollingIntervalMs ?? 500,
  });
}
