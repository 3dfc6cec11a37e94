import type { PrivateKeyAccount, PublicClient } from "viem";
import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { logBroadcast, sendPayouts } from "./broadcastPayouts.ts";
import { readSignedPayouts, readUnfinishedPayouts } from "./readPayouts.ts";

/** The wallet's mined transaction count: payouts below it are mined (or their nonce went). */
async function latestNonce(rpc: PublicClient, account: PrivateKeyAccount): Promise<bigint> {
  return BigInt(await rpc.getTransactionCount({ address: account.address, blockTag: "latest" }));
}

/**
 * Once, when a sender takes the lock: every unfinished payout whose nonce the chain has not
 * used is re-broadcast byte for byte. A crash may have lost them anywhere between our commit
 * and the node's pool. Payouts below the chain's nonce are left to the confirmer.
 */
export async function reconcilePayouts(
  deps: { sql: Database; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
): Promise<void> {
  const unfinished = await readUnfinishedPayouts(deps.sql);
  if (unfinished.length === 0) return;
  const mined = await latestNonce(rpc, account);
  const unmined = unfinished.filter((payout) => payout.nonce >= mined);
  const { outcomes, summary } = await sendPayouts(deps.sql, rpc, unmined);
  logBroadcast(
    deps.logger,
    "reconciled on start: re-broadcast byte for byte",
    unmined,
    outcomes,
    summary,
  );
  deps.logger.info(
    { unfinished: unfinished.length, belowChainNonce: unfinished.length - unmined.length },
    "reconciled on start; payouts below the chain nonce are left to the confirmer",
  );
}

/**
 * Sends payouts still `signed` (never accepted by a node), lowest nonce first. False while any
 * of them is not accepted: nothing newer may be signed until they are.
 */
export async function sendSignedPayouts(
  deps: { sql: Database; logger: Logger },
  rpc: PublicClient,
  account: PrivateKeyAccount,
  limit: number,
): Promise<boolean> {
  const waiting = await readSignedPayouts(deps.sql, limit);
  if (waiting.length === 0) return true;
  const mined = await latestNonce(rpc, account);
  const unmined = waiting.filter((payout) => payout.nonce >= mined);
  if (unmined.length === 0) return true;
  const { outcomes, summary } = await sendPayouts(deps.sql, rpc, unmined);
  logBroadcast(deps.logger, "broadcast signed payouts", unmined, outcomes, summary);
  return summary.broadcast === unmined.length;
}
