import { describe, expect, it } from "vitest";
import type { IncomingTransfer } from "../../api/chain/incomingTransfers.ts";
import {
  type ClaimForMatching,
  decideMatches,
  type MatchingContext,
} from "../../api/matching/decideMatches.ts";

const PRICE = 10_000_000n;
const NOW = 1_800_000_000n;
const alice = `0x${"a".repeat(40)}`;
const bob = `0x${"b".repeat(40)}`;

let logIndex = 0;
function transfer(fields: Partial<IncomingTransfer>): IncomingTransfer {
  logIndex += 1;
  return {
    txHash: `0x${logIndex.toString(16).padStart(64, "0")}`,
    logIndex,
    blockNumber: 10n,
    blockHash: `0x${"f".repeat(64)}`,
    blockTimestamp: NOW,
    from: bob,
    value: PRICE,
    authorizationNonce: null,
    transferOrdinal: 1,
    ...fields,
  };
}

function claim(fields: Partial<ClaimForMatching>): ClaimForMatching {
  return {
    id: "clm_x",
    flow: "claim",
    status: "awaiting_payment",
    failureReason: null,
    payoutAddress: alice,
    amountDue: PRICE + 123n,
    txHash: null,
    txHashSigned: false,
    expiresAt: NOW + 3600n,
    authorizedValue: fields.flow === "x402" ? PRICE : null,
    ...fields,
  };
}

function context(fields: Partial<MatchingContext>): MatchingContext {
  return {
    variant: "A",
    price: PRICE,
    byAuthorization: new Map(),
    byTxHash: new Map(),
    byAmount: new Map(),
    bySender: new Map(),
    ...fields,
  };
}

describe("decideMatches", () => {
  it("matches the exact amount from any wallet in variant A", () => {
    const due = claim({ id: "clm_due" });
    const [decision] = decideMatches(
      [transfer({ value: due.amountDue })],
      context({ byAmount: new Map([[due.amountDue, due]]) }),
    );
    expect(decision).toMatchObject({ kind: "match", claimId: "clm_due", rule: "amount" });
  });

  it("ignores reserved amounts in variant B", () => {
    const due = claim({ id: "clm_due" });
    const [decision] = decideMatches(
      [transfer({ value: due.amountDue })],
      context({ variant: "B", byAmount: new Map([[due.amountDue, due]]) }),
    );
    expect(decision).toMatchObject({ kind: "unmatched", reason: "no_matching_claim" });
  });

  it("gives a tx hash named with the sender's signature precedence over the amount and the sender", () => {
    const paying = transfer({ from: alice, value: PRICE + 123n });
    const named = claim({
      id: "clm_named",
      payoutAddress: bob,
      amountDue: PRICE + 5n,
      txHash: paying.txHash,
      txHashSigned: true,
    });
    const byAmount = claim({ id: "clm_amount" });
    const bySender = claim({ id: "clm_sender" });
    const [decision] = decideMatches(
      [paying],
      context({
        variant: "B",
        byTxHash: new Map([[paying.txHash, named]]),
        byAmount: new Map([[byAmount.amountDue, byAmount]]),
        bySender: new Map([[alice, [bySender]]]),
      }),
    );
    expect(decision).toMatchObject({ claimId: "clm_named", rule: "tx_hash" });
  });

  it("gives a transfer to the sender's own open claim before a claim that names its hash unsigned", () => {
    const paying = transfer({ from: alice, value: PRICE });
    const named = claim({ id: "clm_named", payoutAddress: bob, txHash: paying.txHash });
    const bySender = claim({ id: "clm_sender" });
    const decisions = decideMatches(
      [paying],
      context({
        variant: "B",
        byTxHash: new Map([[paying.txHash, named]]),
        bySender: new Map([[alice, [bySender]]]),
      }),
    );
    expect(decisions[0]).toMatchObject({ claimId: "clm_sender", rule: "sender" });
    const alone = decideMatches(
      [paying],
      context({ variant: "B", byTxHash: new Map([[paying.txHash, named]]) }),
    );
    expect(alone[0]).toMatchObject({ claimId: "clm_named", rule: "tx_hash" });
  });

  it("never pays an x402 claim by its hash, amount or sender", () => {
    const x402 = claim({ id: "clm_x402", flow: "x402", amountDue: PRICE });
    const paying = transfer({ from: alice, value: PRICE });
    const [decision] = decideMatches(
      [paying],
      context({
        variant: "B",
        byTxHash: new Map([[paying.txHash, { ...x402, txHash: paying.txHash }]]),
        bySender: new Map([[alice, [x402]]]),
      }),
    );
    expect(decision).toMatchObject({ kind: "unmatched", reason: "no_matching_claim" });
  });

  it("pays a failed x402 claim whose authorization shows up on chain after all", () => {
    const paying = transfer({ from: alice, authorizationNonce: `0x${"2".repeat(64)}` });
    const failed = claim({
      id: "clm_failed",
      flow: "x402",
      status: "failed",
      failureReason: "x402_settlement_failed",
    });
    const [decision] = decideMatches(
      [paying],
      context({ byAuthorization: new Map([[`${alice}:${paying.authorizationNonce}`, failed]]) }),
    );
    expect(decision).toMatchObject({ claimId: "clm_failed", rule: "x402" });
  });

  it("lets an x402 authorization pay only its own claim", () => {
    const paying = transfer({ from: alice, authorizationNonce: `0x${"1".repeat(64)}` });
    const x402 = claim({ id: "clm_x402", flow: "x402", amountDue: PRICE });
    const [decision] = decideMatches(
      [paying],
      context({
        byAuthorization: new Map([[`${alice}:${paying.authorizationNonce}`, x402]]),
        bySender: new Map([[alice, [claim({ id: "clm_sender" })]]]),
      }),
    );
    expect(decision).toMatchObject({ claimId: "clm_x402", rule: "x402" });
  });

  it("never lets another use of an x402 claim's nonce pay it: only the verified authorization", () => {
    // The payer spends its own nonce on a trifle (or on another value) ahead of the settlement.
    const nonce = `0x${"3".repeat(64)}`;
    for (const status of ["awaiting_payment", "failed"]) {
      const x402 = claim({
        id: "clm_x402",
        flow: "x402",
        status,
        failureReason: status === "failed" ? "x402_settlement_failed" : null,
      });
      for (const value of [0n, 1n, PRICE - 1n, PRICE + 1n, 2n * PRICE]) {
        const [decision] = decideMatches(
          [transfer({ from: alice, value, authorizationNonce: nonce })],
          context({
            byAuthorization: new Map([[`${alice}:${nonce}`, x402]]),
            bySender: new Map([[alice, [claim({ id: "clm_sender" })]]]),
          }),
        );
        expect(decision).toMatchObject({
          kind: "unmatched",
          reason: "not_the_verified_authorization",
          claimId: "clm_x402",
        });
      }
    }
  });

  it("pays the oldest open claim of a sender, one claim per transfer", () => {
    const older = claim({ id: "clm_older" });
    const newer = claim({ id: "clm_newer" });
    const decisions = decideMatches(
      [transfer({ from: alice }), transfer({ from: alice }), transfer({ from: alice })],
      context({ bySender: new Map([[alice, [older, newer]]]) }),
    );
    expect(
      decisions.map((decision) => (decision.kind === "match" ? decision.claimId : decision.reason)),
    ).toEqual(["clm_older", "clm_newer", "no_matching_claim"]);
  });

  it("does not let a payment below the price match a sender's claim", () => {
    const [decision] = decideMatches(
      [transfer({ from: alice, value: PRICE - 1n })],
      context({ bySender: new Map([[alice, [claim({})]]]) }),
    );
    expect(decision).toMatchObject({ kind: "unmatched", reason: "below_price", claimId: null });
  });

  it("reports a payment mined after expiry as claim_expired, naming the claim", () => {
    const due = claim({ id: "clm_late", expiresAt: NOW - 1n, status: "expired" });
    const [decision] = decideMatches(
      [transfer({ value: due.amountDue })],
      context({ byAmount: new Map([[due.amountDue, due]]) }),
    );
    expect(decision).toMatchObject({
      kind: "unmatched",
      reason: "claim_expired",
      claimId: "clm_late",
    });
  });

  it("still pays an expired-looking claim for a payment mined before its expiry", () => {
    const due = claim({ id: "clm_in_time", expiresAt: NOW, status: "expired" });
    const [decision] = decideMatches(
      [transfer({ value: due.amountDue, blockTimestamp: NOW })],
      context({ byAmount: new Map([[due.amountDue, due]]) }),
    );
    expect(decision).toMatchObject({ kind: "match", claimId: "clm_in_time" });
  });

  it("reports a second payment of a claim's amount as claim_already_paid", () => {
    const due = claim({ id: "clm_once" });
    const decisions = decideMatches(
      [transfer({ value: due.amountDue }), transfer({ value: due.amountDue })],
      context({ byAmount: new Map([[due.amountDue, due]]) }),
    );
    expect(decisions[0]).toMatchObject({ kind: "match", claimId: "clm_once" });
    expect(decisions[1]).toMatchObject({
      kind: "unmatched",
      reason: "claim_already_paid",
      claimId: "clm_once",
    });
  });

  it("does not let a named tx pay a variant A claim when it is neither the amount nor from the payout address", () => {
    const paying = transfer({ from: bob, value: PRICE });
    const named = claim({ id: "clm_named", txHash: paying.txHash });
    const [decision] = decideMatches(
      [paying],
      context({ byTxHash: new Map([[paying.txHash, named]]) }),
    );
    expect(decision).toMatchObject({ kind: "unmatched", reason: "no_matching_claim" });
  });
});
