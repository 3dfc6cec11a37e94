import postgres from "postgres";
import { describe, expect, it } from "vitest";
import type { Sql } from "../../api/db/connect.ts";
import { limitLiteral, writtenLimit } from "../../api/db/limitLiteral.ts";

// Never connects: a fragment is only text until a statement holding it is sent.
const sql = postgres("postgres://nobody@127.0.0.1:1/none") as unknown as Sql;

describe("limitLiteral (a row limit written into the statement's text)", () => {
  it("rounds up to one of a few sizes, never below the rows asked for", () => {
    expect([0, 1, 11, 12, 21, 22, 100, 101, 102, 1001].map(writtenLimit)).toEqual([
      11, 11, 11, 21, 21, 51, 101, 101, 201, 1001,
    ]);
    expect(writtenLimit(5000)).toBe(5000);
    const written = new Set(Array.from({ length: 101 }, (_, rows) => writtenLimit(rows + 1)));
    expect(written.size).toBeLessThanOrEqual(4);
  });

  it.each([
    ["a fraction", 1.5],
    ["a negative number", -1],
    ["not a number", Number.NaN],
    ["infinity", Number.POSITIVE_INFINITY],
    ["text that would reach the statement", "21; drop table app.claims" as unknown as number],
  ])("refuses %s before it reaches the text", (_name, rows) => {
    expect(() => limitLiteral(sql, rows)).toThrow(RangeError);
  });
});
