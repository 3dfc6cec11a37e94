import type { Sql } from "../db/connect.ts";
import { type SharedRead, sharedFor } from "../readCache.ts";
import {
  type LedgerDay,
  type LedgerTotals,
  MAX_LEDGER_DAYS,
  readLedgerDaily,
  readLedgerTotals,
} from "./readLedgerStats.ts";

export interface CachedLedgerStats {
  totals(): Promise<LedgerTotals>;
  daily(days: number): Promise<LedgerDay[]>;
  /** Claims completed: the next reads aggregate again. */
  forget(): void;
}

/**
 * The ledger's figures (totals and the per-day series), shared for `ttlMs` by every surface that
 * shows them (the ledger page, GraphQL `stats`, and any to come), and read again as soon as a
 * claim completes (`forget`, on the completion NOTIFY). The database keeps the figures as entries
 * come and go (readLedgerStats.ts), so a read is a few rows; this spares the round trips of each
 * view of the page and each alias of `stats`.
 */
export function cachedLedgerStats(sql: Sql, ttlMs: number): CachedLedgerStats {
  const totals = sharedFor(ttlMs, () => readLedgerTotals(sql));
  const series = new Map<number, SharedRead<LedgerDay[]>>();
  return {
    totals,
    daily(days) {
      // Out of range: refused by readLedgerDaily, and never a key of the map.
      if (!Number.isInteger(days) || days < 1 || days > MAX_LEDGER_DAYS) {
        return readLedgerDaily(sql, days);
      }
      let read = series.get(days);
      if (!read) {
        read = sharedFor(ttlMs, () => readLedgerDaily(sql, days));
        series.set(days, read);
      }
      return read();
    },
    forget() {
      totals.forget();
      for (const read of series.values()) read.forget();
    },
  };
}
