import type { PaymentRequirements } from "@x402/core/types";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CrashPoint } from "../../api/crashHook.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { freePort } from "../support/ports.ts";
import { testServiceEnv } from "../support/service.ts";
import { type ServiceProcess, startServiceProcess } from "../support/serviceProcess.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, paymentTerms } from "../support/x402.ts";

/**
 * The x402 route in a real process, SIGKILLed at its two hardest moments, then the same
 * payment sent again: the payer is charged at most once and paid out at most once, and a
 * payment that did settle is finished from the chain. (The stack's own service runs the
 * matcher and the payout workers.)
 */

let stack: Stack;
const processes: ServiceProcess[] = [];

beforeAll(async () => {
  // The stack's service runs the settlement watcher: it must know settlements are quick here.
  stack = await startStack({ serviceEnv: { X402_SETTLE_TIMEOUT_MS: "1500" } });
});

afterAll(async () => {
  for (const running of processes) await running.stop();
  await stack?.stop();
});

/**
 * An API process. Settling first unless `oneTransaction` (docs/payments.md#one-transaction-settlement):
 * the crash points of the settle-first path, which a remote facilitator keeps.
 */
async function startApi(
  port: number,
  crashAt?: CrashPoint,
  options: { oneTransaction?: boolean } = {},
): Promise<ServiceProcess> {
  const running = startServiceProcess(
    testServiceEnv(stack.chain, stack.database.url, {
      ROLE: "api",
      PORT: String(port),
      X402_SETTLE_TIMEOUT_MS: options.oneTransaction ? "20000" : "1500",
      ...(options.oneTransaction ? {} : { SETTLE_AND_PAY_ADDRESS: "" }),
      ...(crashAt ? { CRASH_AT: crashAt } : {}),
    }),
  );
  processes.push(running);
  await running.answering(`http://127.0.0.1:${port}/api/health`);
  return running;
}

function pay(port: number, holder: string, header: string) {
  return fetch(`http://127.0.0.1:${port}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", "payment-signature": header },
    body: JSON.stringify({ payout_address: holder }),
  });
}

async function signedPayment(payerIndex: number, holder: string) {
  const payer = stack.chain.users[payerIndex];
  if (!payer) throw new Error(`no user ${payerIndex}`);
  const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
    payout_address: holder,
  });
  const header = await handSignedPayment(
    privateKeyToAccount(payer.privateKey),
    terms.accepts[0] as PaymentRequirements,
  );
  return { payer, header };
}

async function x402Record(payer: string) {
  const [row] = await stack.service.sql<{ status: string; claim_id: string }[]>`
    select status, claim_id from app.x402_payments where payer = ${payer.toLowerCase()}`;
  return row;
}

describe("x402 across a crash", () => {
  it("settled with its payout, after recording: the payout sender settles and pays out without the request; the replay gets it", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(3, holder);
    const before = await stack.chain.usdcBalance(payer.address);
    const port = await freePort();
    const crashing = await startApi(port, "after_x402_recorded", { oneTransaction: true });

    await expect(pay(port, holder, header)).rejects.toThrow();
    expect((await crashing.exited).signal).toBe("SIGKILL");
    const record = await x402Record(payer.address);
    // The authorization waits for the payout sender, which needs no request to finish it.
    const done = await stack.untilClaimStatus(record?.claim_id ?? "", "completed");
    expect(done.payout_tx).toBe((done.payment as { tx_hash?: string } | undefined)?.tx_hash);

    await startApi(port, undefined, { oneTransaction: true });
    const replay = await pay(port, holder, header);
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { claim_id: string }).claim_id).toBe(record?.claim_id);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before - 10n * USDC);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  it("after recording, before settling: nothing is charged, the replay says the outcome is unknown", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(0, holder);
    const before = await stack.chain.usdcBalance(payer.address);
    const port = await freePort();
    const crashing = await startApi(port, "after_x402_recorded");

    await expect(pay(port, holder, header)).rejects.toThrow();
    expect((await crashing.exited).signal).toBe("SIGKILL");
    expect(await x402Record(payer.address)).toMatchObject({ status: "settling" });

    await startApi(port);
    const replay = await pay(port, holder, header);

    expect(replay.status).toBe(202);
    const record = await x402Record(payer.address);
    expect(record?.status).toBe("unknown");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
    expect((await stack.api(`/api/claims/${record?.claim_id}`)).body.status).toBe(
      "awaiting_payment",
    );
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
  });

  it("after settling, before recording it: charged once, paid out once, finished from the chain", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(1, holder);
    const before = await stack.chain.usdcBalance(payer.address);
    const port = await freePort();
    const crashing = await startApi(port, "after_x402_settled");

    await expect(pay(port, holder, header)).rejects.toThrow();
    expect((await crashing.exited).signal).toBe("SIGKILL");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before - 10n * USDC);

    await startApi(port);
    const replay = await pay(port, holder, header);
    expect(replay.status).toBe(202);
    const { claim_id } = (await replay.json()) as { claim_id: string };

    await stack.mine(3);
    const done = await stack.untilClaimStatus(claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "x402" });
    expect((await x402Record(payer.address))?.status).toBe("settled");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before - 10n * USDC);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);

    // And once more, now that it is settled: the same claim, still one payout.
    const later = await pay(port, holder, header);
    expect(later.status).toBe(200);
    expect(((await later.json()) as { claim_id: string }).claim_id).toBe(claim_id);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });

  // Last in the file: it moves the chain's clock past the authorization's window.
  it("after recording, before settling, never sent again: the claim fails once the authorization lapses unused", async () => {
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const { payer, header } = await signedPayment(2, holder);
    const before = await stack.chain.usdcBalance(payer.address);
    const port = await freePort();
    const crashing = await startApi(port, "after_x402_recorded");

    await expect(pay(port, holder, header)).rejects.toThrow();
    expect((await crashing.exited).signal).toBe("SIGKILL");
    const { claim_id } = (await x402Record(payer.address)) ?? {};

    // Nobody replays. Once a settlement could have finished, the record is unknown ...
    await waitFor(async () => (await x402Record(payer.address))?.status === "unknown", {
      what: "the abandoned settlement to be unknown",
    });
    // ... and once the authorization's window has passed at depth, unused, the claim fails.
    await stack.chain.testClient.increaseTime({ seconds: 600 });
    await stack.mine(3);
    const failed = await stack.untilClaimStatus(claim_id as string, "failed");
    expect(failed.failure_reason).toBeTruthy();
    expect((await x402Record(payer.address))?.status).toBe("failed");
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(0);
  });
});
