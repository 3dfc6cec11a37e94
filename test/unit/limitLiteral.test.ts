import postgres from "postgres";
import { describe, expect, it } from "vitest";
import type { Sql } from "../../api/db/connect.ts";
import { limitLiteral } from "../../api/db/limitLiteral.ts";

// Never connects: a fragment is only text until a statement holding it is sent.
const sql = postgres("postgres://nobody@127.0.0.1:1/none") as unknown as Sql;

describe("limitLiteral (a row limit written into the statement's text)", () => {
  it("takes a whole number of rows", () => {
    expect(() => limitLiteral(sql, 21)).not.toThrow();
    expect(() => limitLiteral(sql, 0)).not.toThrow();
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
