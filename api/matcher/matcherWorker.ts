import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { createTransferVerifier, matchNextBatch } from "./matchNextBatch.ts";

export function createMatcherWorker(deps: ServiceDeps): Worker {
  const verifier = createTransferVerifier(deps);
  return {
    name: "matcher",
    lockKey: LOCK_KEYS.matcherWorker,
    intervalMs: deps.config.matcher.intervalMs,
    // A transfer becomes matchable, or confirmed, only when a block is indexed.
    wakeChannels: [WAKE_CHANNELS.indexerProgress],
    tick: async () => (await matchNextBatch(deps, { verifier })).more,
  };
}
