import { receiptIssuer } from "../receipts/issueReceipt.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { localAccount } from "../signing/localAccount.ts";
import type { Worker } from "../workers/runWorker.ts";
import type { SettleAndPayCode } from "../x402/settleAndPayCode.ts";
import { createPayoutConfirmer } from "./payoutConfirmer.ts";
import { createPayoutRpc } from "./payoutRpc.ts";
import { createPayoutSender } from "./payoutSender.ts";

/**
 * Exactly-once payouts (DESIGN.md §6) as two workers, each under its own advisory lock:
 * - the sender takes nonces, signs, stores, then broadcasts (payoutSender.ts);
 * - the confirmer stores outcomes, re-broadcasts and replaces (payoutConfirmer.ts).
 * Two loops so neither waits for the other: confirming a block's worth of payouts (receipts,
 * one signed receipt per claim) never delays signing the next batch, and a slow sign-and-send
 * round never delays confirmations. They share no memory; what they share is in Postgres,
 * guarded by row locks, and only the sender ever takes a new nonce.
 * `settleAndPay`: the x402 runtime's check of SettleAndPay's code, which the sender asks before it
 * settles an authorization again after an operator's re-issue (signNewPayouts.ts).
 */
export function createPayoutWorkers(deps: ServiceDeps, settleAndPay?: SettleAndPayCode): Worker[] {
  const { config } = deps;
  const account = localAccount(config.payout.privateKey);
  const rpc = createPayoutRpc(config.chain.payoutRpcUrl, config.chain.chainId);
  // The sender's new rounds travel on a client of their own: a client batches whatever is asked
  // in the same moment, and a read joined to a round the node is slow to take would wait for it.
  const broadcastRpc = createPayoutRpc(config.chain.payoutRpcUrl, config.chain.chainId);
  const issuer = receiptIssuer(config);
  return [
    createPayoutSender(deps, { reads: rpc, broadcasts: broadcastRpc }, account, settleAndPay),
    createPayoutConfirmer(deps, rpc, account, issuer),
  ];
}
