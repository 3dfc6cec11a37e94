import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { type Address, type Hex, parseGwei } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { signTransferAuthorization, submitAuthorization } from "../support/eip3009.ts";
import { payoutsWithoutPayment } from "../support/moneyInvariant.ts";
import { callDevnetToken, payoutTransfersTo } from "../support/payouts.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * The attack suite (RELIABILITY.md, "Attacks on the money"): each known attack on the money,
 * run as the attacker would against a real stack (Anvil, PostgreSQL, Ponder, the service).
 * Whatever each scenario asserts of its own, after each one the chain's logs must show no
 * payout without at least 10 USDC arriving at pay_to, at confirmation depth, for it.
 */

const CONFIRMATIONS = 2;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    rpcProxy: true,
    serviceEnv: { CONFIRMATIONS: String(CONFIRMATIONS), X402_SETTLE_TIMEOUT_MS: "3000" },
  });
});

afterEach(async () => {
  if (!stack) return;
  await stack.chain.testClient.setAutomine(true);
  expect(await payoutsWithoutPayment(stack.chain, stack.service.sql, CONFIRMATIONS)).toEqual([]);
});

afterAll(async () => {
  await stack?.stop();
});

/** A wallet of the attacker's own with 10 USDC and no ETH: it signs, somebody else submits. */
async function fundedPayer() {
  const privateKey = generatePrivateKey();
  const { address } = privateKeyToAccount(privateKey);
  await callDevnetToken(stack.chain, { functionName: "mint", args: [address, 10n * USDC] });
  return { address, privateKey };
}

/** Transactions Anvil holds unmined (automine off). */
async function pendingCount(): Promise<number> {
  const status = (await stack.chain.testClient.request({
    method: "txpool_status" as never,
  })) as { pending: Hex | number };
  return Number(status.pending);
}

/** Mines a block per poll until `check` holds (confirmations need the chain to move). */
function whileMining<T>(check: () => Promise<T | undefined | false>, what: string) {
  return waitFor(
    async () => {
      const value = await check();
      if (value) return value;
      await stack.mine(1);
      return undefined;
    },
    { what, timeoutMs: 45_000, intervalMs: 300 },
  );
}

describe("a payer who front-runs its own x402 settlement with the same nonce", () => {
  // The payer signs the 10 USDC authorization with nonce N and sends it to POST /api/x402/earn;
  // in the same block, ahead of the settlement, it submits its own transferWithAuthorization
  // reusing N for a trifle, with a higher tip. The settlement reverts (N is used); the trifle is
  // indexed carrying N. It must pay nothing: N is not the authorization the service verified.
  it.each([
    ["1 atomic unit, the settlement refused", 1n, "refused"],
    ["0 units, the settlement refused", 0n, "refused"],
    ["1 atomic unit, the settlement's outcome unknown", 1n, "unknown"],
  ] as const)(
    "for %s: the trifle pays nothing, says why, and fails the claim",
    async (_, trifle, outcome) => {
      const payer = await fundedPayer();
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
        payout_address: holder,
      });
      const header = await handSignedPayment(
        privateKeyToAccount(payer.privateKey),
        terms.accepts[0] as PaymentRequirements,
      );
      const nonce = (
        decodePaymentSignatureHeader(header).payload as { authorization: { nonce: Hex } }
      ).authorization.nonce;
      const frontRun = await signTransferAuthorization(payer, stack.chain.payTo.address, trifle, {
        nonce,
      });

      await stack.untilIndexedHead();
      const proxy = stack.rpcProxy;
      if (!proxy) throw new Error("no proxy");
      if (outcome === "unknown") {
        // The node takes the settlement, the facilitator hears a timeout: it cannot know.
        proxy.rule = (call) =>
          call.method === "eth_sendRawTransaction"
            ? { kind: "error_after_forwarding", message: "request timed out" }
            : { kind: "pass" };
      }
      await stack.chain.testClient.setAutomine(false);
      const answer = fetch(`${stack.service.url}/api/x402/earn`, {
        method: "POST",
        headers: { "content-type": "application/json", "payment-signature": header },
        body: JSON.stringify({ payout_address: holder }),
      });
      // The facilitator has verified and broadcast the settlement: the payer sees it in the pool
      // and sends its own use of the same nonce with a higher tip, for the same block.
      await waitFor(async () => (await pendingCount()) >= 1, {
        what: "the settlement to reach the pool",
      });
      const frontRunTx = await submitAuthorization(stack.chain, stack.chain.user(1), frontRun, {
        maxPriorityFeePerGas: parseGwei("50"),
        maxFeePerGas: parseGwei("100"),
      });
      await stack.mine(1);
      await stack.chain.testClient.setAutomine(true);
      proxy.rule = () => ({ kind: "pass" });

      const frontRunReceipt = await stack.chain.publicClient.getTransactionReceipt({
        hash: frontRunTx,
      });
      expect(frontRunReceipt.status).toBe("success");
      const response = await answer;
      // Refused (the settlement reverted), or unknown: never paid.
      expect(response.status).toBe(outcome === "refused" ? 402 : 202);

      // The trifle reaches confirmation depth and the matcher decides on it: unmatched, and why.
      const shown = await whileMining(async () => {
        const { body } = await stack.api(`/api/payments/${frontRunTx}`);
        const [transfer] = (body.transfers ?? []) as Record<string, unknown>[];
        return transfer && ["unmatched", "paid_claim"].includes(transfer.state as string)
          ? transfer
          : undefined;
      }, "the front-run transfer to be decided");
      expect(shown).toMatchObject({ state: "unmatched", reason: "not_the_verified_authorization" });

      const [claim] = await stack.service.sql<{ id: string; status: string }[]>`
      select id, status from app.claims where payout_address = ${holder.toLowerCase()}`;
      expect(claim?.status).toBe("failed");
      const [record] = await stack.service.sql<{ status: string; failure_reason: string }[]>`
      select status, failure_reason from app.x402_payments where claim_id = ${claim?.id ?? ""}`;
      // Unknown until the matcher saw the nonce spent at depth; refused at once otherwise.
      expect(record?.status).toBe("failed");
      if (outcome === "unknown")
        expect(record?.failure_reason).toBe("authorization_spent_elsewhere");
      await stack.mine(CONFIRMATIONS + 1);
      expect(await payoutTransfersTo(stack.chain, holder as Address)).toHaveLength(0);
    },
  );
});

describe("a reorg deeper than CONFIRMATIONS", () => {
  // The matcher decided block X (a payment); a reorg from X - 1 mines that payment again, and a
  // payment the old chain never had, both at X - 1: below the cursor. Stepping back one block
  // would never read them; the matcher must go back to where the chains split.
  it("is followed to where the chains split: a payment mined again lower is read and pays", async () => {
    const first = stack.chain.user(2);
    const second = stack.chain.user(3);
    // A block decided before, that both chains share: where they split above.
    const earlier = await stack.chain.transferUsdc(first, stack.chain.payTo.address, 1n);
    await whileMining(async () => {
      const { body } = await stack.api(`/api/payments/${earlier}`);
      const [transfer] = (body.transfers ?? []) as Record<string, unknown>[];
      return transfer?.state === "unmatched";
    }, "an earlier transfer to be decided");
    const firstClaim = await stack.createClaim(first.address);
    const secondClaim = await stack.createClaim(second.address);
    const firstPayment = await stack.chain.signedUsdcTransfer(
      first,
      stack.chain.payTo.address,
      10n * USDC,
    );
    const paidIn = (
      await stack.chain.publicClient.waitForTransactionReceipt({
        hash: await stack.chain.publicClient.sendRawTransaction({
          serializedTransaction: firstPayment,
        }),
      })
    ).blockNumber;
    await whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${firstClaim.claim_id}`);
      return body.status === "completed";
    }, "the first claim to complete");
    const [payout] = await stack.service.sql<{ tx_hash: Hex }[]>`
      select tx_hash from app.payouts where claim_id = ${firstClaim.claim_id}`;
    const payoutRaw = (await stack.chain.testClient.request({
      method: "eth_getRawTransactionByHash" as never,
      params: [payout?.tx_hash] as never,
    })) as Hex;
    // Never sent on the old chain: mined only in the new one, below the matcher's cursor.
    const secondPayment = await stack.chain.signedUsdcTransfer(
      second,
      stack.chain.payTo.address,
      10n * USDC,
    );

    await stack.untilIndexedHead();
    const head = await stack.chain.publicClient.getBlockNumber({ cacheTime: 0 });
    const splitAbove = paidIn - 2n;
    await stack.chain.testClient.request({
      method: "anvil_reorg" as never,
      params: [
        Number(head - splitAbove),
        [
          [firstPayment, 0],
          [secondPayment, 0],
          [payoutRaw, 1],
        ],
      ] as never,
    });
    expect(head - splitAbove).toBeGreaterThan(CONFIRMATIONS);

    const completed = await whileMining(async () => {
      const { body } = await stack.api(`/api/claims/${secondClaim.claim_id}`);
      return body.status === "completed" ? body : undefined;
    }, "the claim paid by the payment mined below the cursor to complete");
    expect(completed.payment).toMatchObject({ matched_by: "sender" });
    expect(await payoutTransfersTo(stack.chain, second.address)).toHaveLength(1);
    expect(await payoutTransfersTo(stack.chain, first.address)).toHaveLength(1);
  });
});
