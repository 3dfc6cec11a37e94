import { describe, expect, it } from "vitest";
import {
  ledgerAnswers,
  type MadeAnswer,
  readsTheLedgerOnly,
} from "../../api/graphql/ledgerAnswers.ts";

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

  const made =
    (body: string, status = 200) =>
    async () => ({
      status,
      contentType: "application/json",
      body,
    });

  it("is kept under the ledger's version and forgotten when it changes", async () => {
    let version = 0;
    const answers = ledgerAnswers(() => version, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, "application/json");
    if (!key) throw new Error("the stats query may be kept");
    const answer = await answers.answer(key, made('{"data":{}}'));
    expect(answer.body.toString()).toBe('{"data":{}}');
    expect(answers.current(key)).toBe(answer);
    version += 1;
    expect(answers.current(key)).toBeUndefined();
  });

  it("keeps no answer read before the ledger changed, nor an error or a refusal", async () => {
    let version = 0;
    const answers = ledgerAnswers(() => version, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    const readBeforeTheChange = answers.answer(key, async () => {
      version += 1;
      return made('{"data":{}}')();
    });
    expect((await readBeforeTheChange).body.toString()).toBe('{"data":{}}');
    expect(answers.current(key)).toBeUndefined();
    const error = await answers.answer(key, made('{"errors":[{}]}'));
    expect(error.body.toString()).toBe('{"errors":[{}]}');
    expect(answers.current(key)).toBeUndefined();
    expect((await answers.answer(key, made('{"data":null}', 400))).status).toBe(400);
    expect(answers.current(key)).toBeUndefined();
  });

  it("is kept no longer than the ledger's reads may be old", async () => {
    const answers = ledgerAnswers(() => 0, 1);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    await answers.answer(key, made('{"data":{}}'));
    const kept = Date.now();
    while (Date.now() - kept < 2) await new Promise((resolve) => setImmediate(resolve));
    expect(answers.current(key)).toBeUndefined();
  });

  it("runs a query once for the requests that ask while its answer is made, on one version", async () => {
    let version = 0;
    const answers = ledgerAnswers(() => version, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    const finish: (() => void)[] = [];
    let runs = 0;
    const slowRun = (body: string) => () => {
      runs += 1;
      return new Promise<MadeAnswer>((resolve) => {
        finish.push(() => resolve({ status: 200, contentType: "application/json", body }));
      });
    };
    const asked = Array.from({ length: 20 }, () =>
      answers.answer(key, slowRun('{"data":"first"}')),
    );
    expect(runs).toBe(1);
    // A request after a completion does not take the answer begun before it.
    version += 1;
    const afterTheChange = answers.answer(key, slowRun('{"data":"second"}'));
    const joined = answers.answer(key, slowRun('{"data":"third"}'));
    expect(runs).toBe(2);
    for (const done of finish) done();
    const bodies = (await Promise.all(asked)).map((answer) => answer.body.toString());
    expect(bodies).toEqual(asked.map(() => '{"data":"first"}'));
    expect((await afterTheChange).body.toString()).toBe('{"data":"second"}');
    expect(await joined).toBe(await afterTheChange);
    expect(answers.current(key)?.body.toString()).toBe('{"data":"second"}');
  });

  it("runs the query again after a run that failed", async () => {
    const answers = ledgerAnswers(() => 0, 60_000);
    const key = answers.keyFor({ query: "{ stats { completedPayouts } }" }, undefined) as string;
    const failed = answers.answer(key, async () => {
      throw new Error("yoga failed");
    });
    const joined = answers.answer(key, made('{"data":{}}'));
    await expect(failed).rejects.toThrow("yoga failed");
    await expect(joined).rejects.toThrow("yoga failed");
    expect((await answers.answer(key, made('{"data":{}}'))).body.toString()).toBe('{"data":{}}');
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
    // Yoga answers an empty operation name 400 and none 200: not one key for both.
    expect(answers.keyFor({ query, operationName: "" }, undefined)).toBeNull();
    expect(answers.keyFor({ query, operationName: null }, undefined)).toBe(
      answers.keyFor({ query }, undefined),
    );
  });
});
