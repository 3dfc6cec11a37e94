import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { decodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningService } from "../../api/service.ts";
import { startFacilitatorServer } from "../support/facilitatorServer.ts";
import { payoutTransfersTo } from "../support/payouts.ts";
import { freePort } from "../support/ports.ts";
import { startTestService } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { waitFor } from "../support/waitFor.ts";
import { handSignedPayment, payingFetch, paymentTerms } from "../support/x402.ts";

/**
 * What a client reads before paying, the example it can run, a remote facilitator, one that is
 * down, and a settlement whose outcome is unknown.
 */

const repositoryRoot = join(import.meta.dirname, "..", "..");
let stack: Stack;
const extra: RunningService[] = [];

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { X402_SETTLE_TIMEOUT_MS: "1500" } });
});

afterAll(async () => {
  for (const service of extra) await service.stop();
  await stack?.stop();
});

const postEarn = (baseUrl: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${baseUrl}/api/x402/earn`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

describe("GET /api/x402/earn", () => {
  it("gives everything a client needs before paying", async () => {
    const { status, body } = await stack.api("/api/x402/earn");
    expect(status).toBe(200);
    expect(body).toMatchObject({
      endpoint: `POST ${stack.service.config.http.publicUrl}/api/x402/earn`,
      protocol: "x402 v2",
      scheme: "exact",
      network: "eip155:8453",
      amount_atomic: "10000000",
      amount_usdc: "10",
      pay_to: stack.chain.payTo.address,
    });
    for (const field of [
      "asset",
      "body",
      "how",
      "spend_cap",
      "client_example_js",
      "facilitator",
      "discoverable_via",
    ]) {
      expect(body[field], field).toBeTruthy();
    }
    expect(body.spend_cap).toMatch(/\$1.*\$10/s);
  });

  it("has a client_example_js that pays when run as it is", async () => {
    const { body } = await stack.api<{ client_example_js: string }>("/api/x402/earn");
    const directory = await mkdtemp(join(tmpdir(), "x402-example-"));
    try {
      await symlink(join(repositoryRoot, "node_modules"), join(directory, "node_modules"));
      await writeFile(join(directory, "example.mjs"), body.client_example_js);
      const { stdout } = await promisify(execFile)(process.execPath, ["example.mjs"], {
        cwd: directory,
        env: { PATH: process.env.PATH, PRIVATE_KEY: stack.chain.user(0).privateKey },
        timeout: 60_000,
      });
      const [status, json] = [stdout.slice(0, 3), JSON.parse(stdout.slice(4))];
      expect(status).toBe("200");
      expect(json).toMatchObject({
        status: "completed",
        payout_address: stack.chain.user(0).address,
      });
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("facilitators", () => {
  it("pays through a remote facilitator reached by URL", async () => {
    const facilitator = await startFacilitatorServer(stack.chain, stack.database.url);
    try {
      const service = await startTestService(stack.chain, stack.database.url, {
        ROLE: "api",
        X402_FACILITATOR: "remote",
        X402_FACILITATOR_URL: facilitator.url,
      });
      extra.push(service);
      const holder = privateKeyToAccount(generatePrivateKey()).address;
      const pay = payingFetch(stack.chain.user(1).privateKey, "$10");

      const response = await pay(`${service.url}/api/x402/earn`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ payout_address: holder }),
      });

      expect(response.status).toBe(200);
      const settlement = decodePaymentResponseHeader(
        response.headers.get("payment-response") ?? "",
      );
      const { claim_id } = (await response.json()) as { claim_id: string };
      await stack.untilClaimStatus(claim_id, "completed");
      const payouts = await payoutTransfersTo(stack.chain, holder);
      expect(payouts).toHaveLength(1);
      // A remote facilitator settles first: the payout is a second transaction
      // (docs/payments.md#one-transaction-settlement).
      expect(payouts[0]?.txHash).not.toBe(settlement.transaction);
    } finally {
      await facilitator.stop();
    }
  });

  it("fails the claim and answers 402 when settlement is refused after verification", async () => {
    const facilitator = await startFacilitatorServer(stack.chain, stack.database.url, {
      refuseSettle: "invalid_exact_evm_insufficient_balance",
    });
    try {
      const service = await startTestService(stack.chain, stack.database.url, {
        ROLE: "api",
        X402_FACILITATOR: "remote",
        X402_FACILITATOR_URL: facilitator.url,
      });
      extra.push(service);
      const payer = stack.chain.user(4);
      const before = await stack.chain.usdcBalance(payer.address);
      const terms = await paymentTerms(`${service.url}/api/x402/earn`, {
        payout_address: payer.address,
      });
      const header = await handSignedPayment(
        privateKeyToAccount(payer.privateKey),
        terms.accepts[0] as PaymentRequirements,
      );

      const response = await postEarn(
        service.url,
        { payout_address: payer.address },
        { "payment-signature": header },
      );
      const body = (await response.json()) as { reason: string };

      expect(response.status).toBe(402);
      expect(body.reason).toBe("insufficient_balance");
      const [claim] = await stack.service.sql<{ status: string; failure_reason: string }[]>`
        select c.status, c.failure_reason from app.claims c
        join app.x402_payments x on x.claim_id = c.id
        where x.payer = ${payer.address.toLowerCase()} and x.status = 'failed'`;
      expect(claim).toEqual({ status: "failed", failure_reason: "x402_settlement_failed" });
      expect(await stack.chain.usdcBalance(payer.address)).toBe(before);

      // The same payment again gets the same refusal, and still settles nothing.
      const again = await postEarn(
        service.url,
        { payout_address: payer.address },
        { "payment-signature": header },
      );
      expect(again.status).toBe(402);
      expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
    } finally {
      await facilitator.stop();
    }
  });

  it("answers 503 when the facilitator cannot be reached, and charges nothing", async () => {
    const service = await startTestService(stack.chain, stack.database.url, {
      ROLE: "api",
      X402_FACILITATOR: "remote",
      X402_FACILITATOR_URL: `http://127.0.0.1:${await freePort()}`,
    });
    extra.push(service);
    const [before] = await stack.service.sql<
      { n: number }[]
    >`select count(*)::int as n from app.claims`;

    const unpaid = await postEarn(service.url, { payout_address: stack.chain.user(2).address });
    expect(unpaid.status).toBe(503);
    expect(unpaid.headers.get("retry-after")).toBe("5");
    expect(await unpaid.json()).toMatchObject({ type: "/problems/facilitator_unavailable" });

    const terms = await paymentTerms(`${stack.service.url}/api/x402/earn`, {
      payout_address: stack.chain.user(2).address,
    });
    const header = await handSignedPayment(
      privateKeyToAccount(stack.chain.user(2).privateKey),
      terms.accepts[0] as PaymentRequirements,
    );
    const paid = await postEarn(
      service.url,
      { payout_address: stack.chain.user(2).address },
      { "payment-signature": header },
    );
    expect(paid.status).toBe(503);
    const [after] = await stack.service.sql<
      { n: number }[]
    >`select count(*)::int as n from app.claims`;
    expect(after?.n).toBe(before?.n);
  });
});

describe("settlement outcome unknown", () => {
  it("answers 202 with the claim's status_url, and the matcher finishes the claim from the chain", async () => {
    const payer = stack.chain.user(3);
    const holder = privateKeyToAccount(generatePrivateKey()).address;
    const url = `${stack.service.url}/api/x402/earn`;
    const terms = await paymentTerms(url, { payout_address: holder });
    const header = await handSignedPayment(
      privateKeyToAccount(payer.privateKey),
      terms.accepts[0] as PaymentRequirements,
    );

    // Nothing is mined: the facilitator's settlement waits for its receipt and gives up.
    await stack.chain.testClient.setAutomine(false);
    let body: { claim_id: string; status_url: string; status: string };
    try {
      const response = await postEarn(
        stack.service.url,
        { payout_address: holder },
        { "payment-signature": header },
      );
      expect(response.status).toBe(202);
      body = (await response.json()) as typeof body;
    } finally {
      await stack.chain.testClient.setAutomine(true);
    }
    expect(body.status).toBe("awaiting_payment");
    expect(body.status_url).toContain(body.claim_id);
    const [record] = await stack.service.sql`
      select status from app.x402_payments where claim_id = ${body.claim_id}`;
    expect(record?.status).toBe("unknown");

    await stack.mine(3);

    const done = await stack.untilClaimStatus(body.claim_id, "completed");
    expect(done.payment).toMatchObject({ matched_by: "x402" });
    await waitFor(
      async () => {
        const [row] = await stack.service
          .sql`select status from app.x402_payments where claim_id = ${body.claim_id}`;
        return row?.status === "settled";
      },
      { what: "the x402 record to be settled" },
    );
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);

    const replay = await postEarn(
      stack.service.url,
      { payout_address: holder },
      { "payment-signature": header },
    );
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { claim_id: string }).claim_id).toBe(body.claim_id);
    expect(await payoutTransfersTo(stack.chain, holder)).toHaveLength(1);
  });
});
