import { createFacilitatorConfig } from "@coinbase/x402";
import { x402Facilitator } from "@x402/core/facilitator";
import { HTTPFacilitatorClient } from "@x402/core/http";
import type { FacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator";
import { createPublicClient, createWalletClient, http } from "viem";
import { nonceManager, privateKeyToAccount } from "viem/accounts";
import { chainDefinition } from "../chain/publicClient.ts";
import type { ServiceConfig } from "../config.ts";
import { networkId } from "../offer/buildOffer.ts";

export interface Facilitator {
  client: FacilitatorClient;
  kind: "local" | "remote";
  /** The local facilitator needs the RPC: a check before verify turns an outage into 503. */
  checkReady(): Promise<void>;
}

/**
 * The payment facilitator, by configuration: in-process (verifies and settles itself with
 * FACILITATOR_PRIVATE_KEY, which pays the gas) or remote (a URL, or Coinbase CDP with its
 * API keys). Returns null when x402 is switched off.
 */
export function createFacilitator(config: ServiceConfig): Facilitator | null {
  const { x402 } = config;
  if (x402.facilitator === "off") return null;
  if (x402.facilitator === "remote") {
    const client =
      x402.cdp && !x402.facilitatorUrl
        ? new HTTPFacilitatorClient(createFacilitatorConfig(x402.cdp.keyId, x402.cdp.keySecret))
        : new HTTPFacilitatorClient({ url: x402.facilitatorUrl, timeoutMs: x402.settleTimeoutMs });
    return { client, kind: "remote", checkReady: async () => {} };
  }
  if (!x402.facilitatorPrivateKey) throw new Error("FACILITATOR_PRIVATE_KEY is required");

  const chain = chainDefinition(config.chain.chainId, config.chain.rpcUrl);
  const transport = http(config.chain.rpcUrl, { timeout: 10_000, retryCount: 1 });
  // Short polling: the settle waits for its receipt, and every poll interval is latency.
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  // Concurrent settlements from one key need viem's nonce manager (else they collide).
  const account = privateKeyToAccount(x402.facilitatorPrivateKey, { nonceManager });
  const walletClient = createWalletClient({ account, chain, transport });
  const signer = toFacilitatorEvmSigner(
    {
      address: account.address,
      getCode: (args) => publicClient.getCode(args),
      readContract: (args) => publicClient.readContract({ ...args, args: args.args ?? [] }),
      verifyTypedData: (args) =>
        publicClient.verifyTypedData(args as Parameters<typeof publicClient.verifyTypedData>[0]),
      writeContract: (args) => walletClient.writeContract({ ...args, args: args.args ?? [] }),
      sendTransaction: (args) => walletClient.sendTransaction(args),
      waitForTransactionReceipt: (args) => publicClient.waitForTransactionReceipt(args),
    },
    { confirmationTimeoutMs: x402.settleTimeoutMs },
  );
  const facilitator = registerExactEvmScheme(new x402Facilitator(), {
    signer,
    networks: networkId(config),
  });
  return {
    kind: "local",
    client: {
      verify: (payload, requirements) => facilitator.verify(payload, requirements),
      settle: (payload, requirements) => facilitator.settle(payload, requirements),
      getSupported: async () => facilitator.getSupported() as SupportedResponse,
    },
    async checkReady() {
      await publicClient.getBlockNumber({ cacheTime: 0 });
    },
  };
}
