import type { Sql } from "./connect.ts";

/**
 * The row limits a statement is written with: `limitLiteral` rounds up to the first of these
 * that holds the rows asked for, so a connection prepares a few statements, not one per limit a
 * client may choose (postgres.js keeps every statement it prepared for the connection's life).
 */
const WRITTEN_LIMITS = [11, 21, 51, 101, 201, 501, 1001];

/**
 * A row limit written into the statement's text rather than sent as a parameter: at least
 * `rows`, rounded up to one of a few sizes (the caller keeps the rows it wants). With
 * `limit $n` PostgreSQL's generic plan cannot know how few rows are wanted and assumes a tenth
 * of the table, so it finds that plan dear and plans every execution afresh: on a year of traffic
 * a deep ledger page spent 0.27 ms planning against 0.15 ms reading (docs/traps.md#postgresql).
 * With the number in the text, each statement keeps one plan. `rows` must be a whole number;
 * anything else throws rather than reach the text.
 */
export function limitLiteral(sql: Sql, rows: number) {
  return sql.unsafe(String(writtenLimit(rows)));
}

/** The limit `limitLiteral` writes for `rows`. */
export function writtenLimit(rows: number): number {
  if (!Number.isSafeInteger(rows) || rows < 0) {
    throw new RangeError(`A row limit must be a whole number of rows, not ${rows}`);
  }
  return WRITTEN_LIMITS.find((limit) => limit >= rows) ?? rows;
}
