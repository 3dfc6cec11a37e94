import type { Sql } from "../db/connect.ts";
import { type SharedRead, sharedFor } from "../readCache.ts";
import { type LedgerPage, listLedgerEntries } from "./listLedgerEntries.ts";

export interface CachedFirstPages {
  /** The newest `limit` completed payouts, unfiltered: what most ledger views ask for. */
  read(limit: number): Promise<LedgerPage>;
  /** Claims completed: the next reads read the ledger anew. */
  forget(): void;
}

/**
 * The ledger's first page, unfiltered, per page size, shared for `ttlMs` by every surface (the JSON
 * ledger, the HTML page, GraphQL, MCP, A2A) and read again as soon as a claim completes (`forget`,
 * on the completion NOTIFY, like the ledger's aggregates). Without it every view is a join over the
 * claims, their payouts and payments, and the ledger routes are bound by PostgreSQL at a tenth of
 * bare Express (BENCHMARKS.md#http-routes). Later pages and filtered views are read each time:
 * their keys are unbounded, and they are rarely asked for.
 */
export function cachedFirstPages(sql: Sql, ttlMs: number): CachedFirstPages {
  const pages = new Map<number, SharedRead<LedgerPage>>();
  return {
    read(limit) {
      let read = pages.get(limit);
      if (!read) {
        read = sharedFor(ttlMs, () => listLedgerEntries(sql, { limit }));
        pages.set(limit, read);
      }
      return read();
    },
    forget() {
      for (const read of pages.values()) read.forget();
    },
  };
}
