import { expect, it } from "vitest";
import { claimView } from "../../api/claims/claimView.ts";
import type { ClaimDetails } from "../../api/claims/readClaim.ts";
import { claimAnswers } from "../../api/http/claimAnswers.ts";
import { devnetAccounts } from "../../scripts/devnet/accounts.ts";
import { testServiceConfig } from "../support/service.ts";

const config = testServiceConfig(
  { rpcUrl: "http://127.0.0.1:1", accounts: devnetAccounts() },
  "postgres://nobody@127.0.0.1:1/none",
);

/** A claim with every field set, as a fresh object each time (as each database read gives it). */
function paidClaim(): ClaimDetails {
  return {
    id: "clm_abcdefghijklmnopqrstuv",
    flow: "claim",
    status: "completed",
    payoutAddress: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    agentName: "answers",
    hasEmail: true,
    amountDue: 10_000_123n,
    txHash: `0x${"1".repeat(64)}`,
    txHashSigned: true,
    createdAt: new Date("2026-11-25T10:00:00Z"),
    expiresAt: new Date("2026-12-02T10:00:00Z"),
    paidAt: new Date("2026-11-25T10:01:00Z"),
    completedAt: new Date("2026-11-25T10:01:05Z"),
    failureReason: "none",
    payment: {
      txHash: `0x${"2".repeat(64)}`,
      logIndex: 3,
      from: "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
      value: 10_000_123n,
      matchedBy: "amount",
      blockNumber: 42n,
    },
    payoutTx: `0x${"3".repeat(64)}`,
  };
}

/** The claim with one field, at any depth, changed. */
function changed(path: string[]): ClaimDetails {
  const claim = paidClaim() as unknown as Record<string, unknown>;
  const parent = path.slice(0, -1).reduce((at, key) => at[key] as Record<string, unknown>, claim);
  const key = path.at(-1) as string;
  const value = parent[key];
  parent[key] =
    value instanceof Date
      ? new Date(value.getTime() + 1000)
      : typeof value === "bigint"
        ? value + 1n
        : typeof value === "number"
          ? value + 1
          : typeof value === "boolean"
            ? !value
            : value === null
              ? "set"
              : /^0x[0-9a-f]+$/i.test(String(value))
                ? `${String(value).slice(0, -1)}${String(value).endsWith("0") ? "1" : "0"}`
                : `${String(value)}x`;
  return claim as unknown as ClaimDetails;
}

function fieldPaths(value: object, prefix: string[] = []): string[][] {
  return Object.entries(value).flatMap(([key, item]) =>
    item && typeof item === "object" && !(item instanceof Date)
      ? fieldPaths(item, [...prefix, key])
      : [[...prefix, key]],
  );
}

it("gives the same answer for the same claim read again, and the view's bytes", () => {
  const answer = claimAnswers(config);
  const first = answer(paidClaim());
  expect(answer(paidClaim())).toBe(first);
  expect(JSON.parse(first.body.toString("utf8"))).toEqual(
    JSON.parse(JSON.stringify(claimView(config, paidClaim()))),
  );
  expect(first.headers).toMatchObject({
    "Cache-Control": "no-store",
    "Content-Type": "application/json; charset=utf-8",
  });
});

it("builds a new answer when any field of the claim changed, at any depth", () => {
  const paths = fieldPaths(paidClaim());
  expect(paths.length).toBeGreaterThan(20);
  for (const path of paths) {
    const answer = claimAnswers(config);
    const before = answer(paidClaim());
    const after = answer(changed(path));
    expect(after, path.join(".")).not.toBe(before);
    // And back: the claim as it was reads as it was.
    expect(answer(paidClaim()).body.equals(before.body), path.join(".")).toBe(true);
  }
  const withoutPayment = { ...paidClaim(), status: "awaiting_payment" as const, payment: null };
  const answer = claimAnswers(config);
  const paid = answer(paidClaim());
  expect(answer(withoutPayment)).not.toBe(paid);
});
