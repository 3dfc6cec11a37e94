import type { Hex, PublicClient, TransactionReceipt } from "viem";
import { receiptOrNull } from "./transferLogs.ts";

/** Too many RPC-backed public reads are running: the caller answers "try again shortly". */
export class ChainReadsBusy extends Error {
  constructor() {
    super("too many RPC-backed public reads at once");
    this.name = "ChainReadsBusy";
  }
}

/**
 * The chain as the public reads (POST /api/receipts/verify, GET /api/payments/{tx}) see it, so a
 * stranger cannot spend the RPC quota the payouts need: a transaction's receipt (or that the
 * chain does not know it) and the head are shared for `cacheMs` by every caller, and at most
 * `maxConcurrent` RPC calls for them run at once; beyond that a read fails at once with
 * `ChainReadsBusy` instead of queueing. `maxEntries` bounds the cache (oldest go first).
 */
export interface PublicChainReads {
  head(): Promise<bigint>;
  receipt(hash: Hex): Promise<TransactionReceipt | null>;
}

interface Entry<T> {
  at: number;
  value: Promise<T>;
}

export function publicChainReads(
  chain: PublicClient,
  options: { cacheMs: number; maxConcurrent: number; maxEntries?: number },
): PublicChainReads {
  const { cacheMs, maxConcurrent, maxEntries = 10_000 } = options;
  let running = 0;
  let head: Entry<bigint> | null = null;
  const receipts = new Map<string, Entry<TransactionReceipt | null>>();

  async function gated<T>(call: () => Promise<T>): Promise<T> {
    if (running >= maxConcurrent) throw new ChainReadsBusy();
    running += 1;
    try {
      return await call();
    } finally {
      running -= 1;
    }
  }

  /** A shared answer; a failed one is not kept (the next caller asks again). */
  function shared<T>(
    entry: Entry<T> | null | undefined,
    ask: () => Promise<T>,
    keep: (fresh: Entry<T> | null) => void,
  ): Promise<T> {
    if (entry && Date.now() - entry.at < cacheMs) return entry.value;
    const fresh: Entry<T> = { at: Date.now(), value: gated(ask) };
    keep(fresh);
    fresh.value.catch(() => keep(null));
    return fresh.value;
  }

  return {
    head: () =>
      shared(
        head,
        () => chain.getBlockNumber({ cacheTime: 0 }),
        (entry) => {
          head = entry;
        },
      ),
    receipt(hash) {
      const key = hash.toLowerCase();
      return shared(
        receipts.get(key),
        () => receiptOrNull(chain, hash),
        (entry) => {
          receipts.delete(key);
          if (!entry) return;
          receipts.set(key, entry);
          if (receipts.size > maxEntries) {
            const oldest = receipts.keys().next().value;
            if (oldest !== undefined) receipts.delete(oldest);
          }
        },
      );
    },
  };
}
