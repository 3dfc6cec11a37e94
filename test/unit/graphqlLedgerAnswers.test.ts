import { describe, expect, it } from "vitest";
import { ledgerAnswers, readsTheLedgerOnly } from "../../api/graphql/ledgerAnswers.ts";

describe("a GraphQL query whose answer may be kept until the ledger changes", () => {
  it.each([
    "{ ledger { edges { node { claimId } } } }",
    "{ ledger(first: 20) { edges { cursor node { claimId payoutTx } } pageInfo { hasNextPage } } }",
    "query Ledger { stats { completedPayouts daily(days: 7) { day } } }",
    "{ a: ledger(first: 5) { nodes { claimId } } b: stats { usdcPaidOut } __typename }",
  ])("reads the ledger alone: %s", (query) => {
    expect(readsTheLedgerOnly(query)).toBe(true);
  });

  it.each([
    ["a later page", '{ ledger(after: "abc") { nodes { claimId } } }'],
    ["a filtered page", '{ ledger(agentName: "x") { nodes { claimId } } }'],
    ["a time range", '{ ledger(since: "2026-01-01T00:00:00Z") { nodes { claimId } } }'],
    ["a claim, whose status changes without a completion", '{ claim(id: "x") { status } }'],
    ["the ledger beside a claim", '{ stats { completedPayouts } claim(id: "x") { status } }'],
    ["variables", "query ($n: Int) { ledger(first: $n) { nodes { claimId } } }"],
    ["a directive", "{ ledger @skip(if: false) { nodes { claimId } } }"],
    ["a root fragment", "fragment F on Query { stats { completedPayouts } } { ...F }"],
    ["a mutation", "mutation { createClaim { claimId } }"],
    [
      "two operations",
      "query A { stats { completedPayouts } } query B { ledger { nodes { claimId } } }",
    ],
    ["text that is not GraphQL", "{ ledger("],
  ])("does not read the ledger alone: %s", (_, query) => {
    expect(readsTheLedgerOnly(query)).toBe(false);
  });

  it("is kept under the ledger's version and forgotten when it changes", () => {
    let version = 0;
    const answers = ledgerAnswers(() => version, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, "application/json");
    if (!key) throw new Error("the stats query may be kept");
    answers.keep(key, answers.version(), 200, "application/json", '{"data":{}}');
    expect(answers.current(key)?.body.toString()).toBe('{"data":{}}');
    version += 1;
    expect(answers.current(key)).toBeUndefined();
  });

  it("keeps no answer read before the ledger changed, nor an error or a refusal", () => {
    let version = 0;
    const answers = ledgerAnswers(() => version, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    const before = answers.version();
    version += 1;
    answers.keep(key, before, 200, "application/json", '{"data":{}}');
    expect(answers.current(key)).toBeUndefined();
    answers.keep(key, answers.version(), 200, "application/json", '{"errors":[{}]}');
    expect(answers.current(key)).toBeUndefined();
    answers.keep(key, answers.version(), 400, "application/json", '{"data":null}');
    expect(answers.current(key)).toBeUndefined();
  });

  it("is kept no longer than the ledger's reads may be old", async () => {
    const answers = ledgerAnswers(() => 0, 1);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    answers.keep(key, 0, 200, "application/json", '{"data":{}}');
    const kept = Date.now();
    while (Date.now() - kept < 2) await new Promise((resolve) => setImmediate(resolve));
    expect(answers.current(key)).toBeUndefined();
  });

  it("keys by what shapes the answer, and refuses bodies it cannot judge", () => {
    const answers = ledgerAnswers(() => 0, 60_000);
    const query = "{ stats { completedPayouts } }";
    expect(answers.keyFor({ query }, "application/json")).not.toBe(
      answers.keyFor({ query }, "application/graphql-response+json"),
    );
    expect(answers.keyFor({ query, variables: { a: 1 } }, undefined)).toBeNull();
    expect(answers.keyFor({ query, extensions: {} }, undefined)).toBeNull();
    expect(answers.keyFor({ query, other: 1 }, undefined)).toBeNull();
    expect(answers.keyFor([{ query }], undefined)).toBeNull();
    expect(answers.keyFor({ query, variables: {} }, undefined)).not.toBeNull();
  });
});
