import type { Sql } from "./connect.ts";

/**
 * A row limit written into the statement's text rather than sent as a parameter. With `limit $n`
 * PostgreSQL's generic plan cannot know how few rows are wanted and assumes a tenth of the
 * table, so it finds that plan dear and plans every execution afresh: on a year of traffic a
 * deep ledger page spent 0.27 ms planning against 0.15 ms reading (docs/traps.md#postgresql).
 * With the number in the text, a statement (one per page size) keeps its one plan. `rows` must
 * be a checked whole number; anything else throws rather than reach the text.
 */
export function limitLiteral(sql: Sql, rows: number) {
  if (!Number.isSafeInteger(rows) || rows < 0) {
    throw new RangeError(`A row limit must be a whole number of rows, not ${rows}`);
  }
  return sql.unsafe(String(rows));
}
