import { createFacilitatorConfig } from "@coinbase/x402";
import { InMemoryPendingSettlementStore, x402Facilitator } from "@x402/core/facilitator";
import { HTTPFacilitatorClient } from "@x402/core/http";
import type { FacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { createNonceManager, createPublicClient, createWalletClient, http } from "viem";
import { networkId } from "../chain/networkId.ts";
import { chainDefinition } from "../chain/publicClient.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { localAccount } from "../signing/localAccount.ts";
import { settleWatched, verifyWatched, watchedRead } from "./rpcDuringVerify.ts";

export interface Facilitator {
  client: FacilitatorClient;
  kind: "local" | "remote";
  /** The local facilitator needs the RPC: a check before verify turns an outage into 503. */
  checkReady(): Promise<void>;
  /**
   * After a settlement whose outcome is unknown: forget the nonces the local signer counted.
   * viem's nonce manager never hands out a nonce below the last one it gave, so a settlement
   * dropped by the node or a reorg would leave every later one behind a nonce gap for good.
   */
  resetNonces(): void;
  /**
   * Before settling an authorization again whose settlement dropped out of the chain: the SDK
   * remembers the transaction it sent for a signature and, asked again, only waits for that
   * one (which the chain no longer has); forgetting it makes it verify and send anew.
   */
  forgetPendingSettlement(signature: string): void;
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
    return {
      client,
      kind: "remote",
      checkReady: async () => {},
      resetNonces: () => {},
      forgetPendingSettlement: () => {},
    };
  }
  if (!x402.facilitatorPrivateKey) throw new Error("FACILITATOR_PRIVATE_KEY is required");

  const chain = chainDefinition(config.chain.chainId, config.chain.rpcUrl);
  const transport = http(config.chain.rpcUrl, { timeout: 10_000, retryCount: 1 });
  // Short polling: the settle waits for its receipt, and every poll interval is latency.
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  // Concurrent settlements from one key need a nonce manager (else they collide). It counts
  // from the chain's MINED count, not "pending": nodes differ on whether a transaction queued
  // behind a gap counts as pending (Anvil counts it), and a reset must land on the gap.
  const nonceManager = createNonceManager({
    source: {
      get: ({ address }) => publicClient.getTransactionCount({ address, blockTag: "latest" }),
      set: () => {},
    },
  });
  const account = localAccount(x402.facilitatorPrivateKey, { nonceManager });
  const walletClient = createWalletClient({ account, chain, transport });
  const signer = toFacilitatorEvmSigner(
    {
      address: account.address,
      // Verification reads: one that goes unanswered makes a refusal untrustworthy (rpcDuringVerify.ts).
      getCode: watchedRead((args) => publicClient.getCode(args)),
      readContract: watchedRead((args) =>
        publicClient.readContract({ ...args, args: args.args ?? [] }),
      ),
      verifyTypedData: watchedRead((args) =>
        publicClient.verifyTypedData(args as Parameters<typeof publicClient.verifyTypedData>[0]),
      ),
      writeContract: (args) => walletClient.writeContract({ ...args, args: args.args ?? [] }),
      sendTransaction: (args) => walletClient.sendTransaction(args),
      waitForTransactionReceipt: (args) => publicClient.waitForTransactionReceipt(args),
    },
    { confirmationTimeoutMs: x402.settleTimeoutMs },
  );
  const pendingSettlements = new InMemoryPendingSettlementStore();
  const facilitator = new x402Facilitator().register(
    networkId(config),
    new ExactEvmScheme(signer, { pendingSettlementStore: pendingSettlements }),
  );
  return {
    kind: "local",
    client: {
      verify: (payload, requirements) =>
        verifyWatched(() => facilitator.verify(payload, requirements)),
      settle: (payload, requirements) =>
        settleWatched(() => facilitator.settle(payload, requirements)),
      getSupported: async () => facilitator.getSupported() as SupportedResponse,
    },
    async checkReady() {
      await publicClient.getBlockNumber({ cacheTime: 0 });
    },
    forgetPendingSettlement(signature) {
      void pendingSettlements.delete(signature);
    },
    resetNonces() {
      nonceManager.reset({ address: account.address, chainId: config.chain.chainId });
    },
  };
}
