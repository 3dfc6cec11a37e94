import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { type Stack, startStack } from "../support/stack.ts";

/** The claims REST routes: shapes, and every kind of bad input (a clear 4xx, no claim). */

let stack: Stack;
let user: string;

beforeAll(async () => {
  stack = await startStack({ serviceEnv: { MATCHING_VARIANT: "A" } });
  user = stack.chain.users[0]?.address as string;
});

afterAll(async () => {
  await stack?.stop();
});

describe("POST /api/claims", () => {
  it("creates a claim with a unique amount to pay and says how to pay it", async () => {
    const { status, body, headers } = await stack.api("/api/claims", {
      body: { payout_address: user, agent_name: "tester", email: "agent@example.com" },
    });

    expect(status).toBe(201);
    expect(body).toMatchObject({
      status: "awaiting_payment",
      pay_to: stack.chain.payTo.address,
      payout_address: user,
      agent_name: "tester",
      email_receipt: true,
      payout_usdc: "1",
    });
    expect(body.claim_id).toMatch(/^clm_[A-Za-z0-9_-]{22}$/);
    expect(body.amount_due_usdc).toMatch(/^10\.\d{6}$/);
    expect(body.amount_due_usdc).not.toBe("10.000000");
    expect(body.amount).toBe(body.amount_due_usdc);
    expect(body.status_url).toBe(
      `${stack.service.url.replace("127.0.0.1", "localhost")}/api/claims/${body.claim_id}`,
    );
    expect(headers.get("location")).toBe(body.status_url);
    expect(new Date(body.expires_at as string).getTime()).toBeGreaterThan(
      Date.now() + 6 * 86400_000,
    );
    expect(body.payment_instructions).toMatchObject({
      pay_to: stack.chain.payTo.address,
      usdc_contract: BASE_USDC_ADDRESS,
      chain_id: 8453,
      amount_usdc: body.amount_due_usdc,
    });
    expect(body).not.toHaveProperty("email");
  });

  it("gives every open claim its own amount", async () => {
    const amounts = new Set<unknown>();
    for (let index = 0; index < 20; index++) {
      // A distinct agent name per request: the same request again gets its open claim back.
      const { body } = await stack.api("/api/claims", {
        body: { payout_address: user, agent_name: `amounts-${index}` },
      });
      amounts.add(body.amount_due_usdc);
    }
    expect(amounts.size).toBe(20);
  });

  const badBodies: [string, unknown, string][] = [
    ["a missing payout address", {}, "payout_address"],
    ["a number as payout address", { payout_address: 42 }, "payout_address"],
    ["an address that is not hex", { payout_address: "0xZZZ" }, "payout_address"],
    ["the zero address", { payout_address: `0x${"0".repeat(40)}` }, "payout_address"],
    [
      "a mixed-case address with a wrong checksum",
      { payout_address: "0x70997970C51812dc3A010C7d01b50e0d17dc79c8" },
      "payout_address",
    ],
    [
      "an invalid email",
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", email: "nope" },
      "email",
    ],
    [
      "an oversized agent name",
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", agent_name: "a".repeat(65) },
      "agent_name",
    ],
    [
      "a control character in the agent name",
      {
        payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
        agent_name: "evil\u0000name",
      },
      "agent_name",
    ],
    [
      "a text-direction override in the agent name",
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", agent_name: "abc\u202Edef" },
      "agent_name",
    ],
    ...(
      [
        ["a zero-width space", "ali\u200Bce"],
        ["a word joiner", "ali\u2060ce"],
        ["a byte order mark", "\uFEFFalice"],
        ["tag characters", "alice\u{E0041}\u{E007F}"],
        ["a private-use character", "alice\uE000"],
        ["an unassigned code point", "alice\u0378"],
      ] as const
    ).map(([what, name]): [string, unknown, string] => [
      `${what} in the agent name`,
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", agent_name: name },
      "agent_name",
    ]),
    [
      "a tx hash of the wrong length",
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", tx_hash: "0x1234" },
      "tx_hash",
    ],
    [
      "an unknown field",
      { payout_address: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", payoutAddress: "x" },
      "",
    ],
  ];

  it.each(badBodies)("refuses %s with 400 and creates nothing", async (_, body, field) => {
    const before = await stack.claimCount();
    const response = await stack.api("/api/claims", { body });

    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ type: "/problems/invalid_request", status: 400 });
    expect(response.body.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ field })]),
    );
    expect(await stack.claimCount()).toBe(before);
  });

  it.each([
    ["the service's own pay_to", () => stack.chain.payTo.address],
    ["the payout wallet", () => stack.chain.payout.address],
    ["the USDC contract", () => BASE_USDC_ADDRESS],
  ])("refuses %s as payout address", async (_, address) => {
    const before = await stack.claimCount();
    const response = await stack.api("/api/claims", { body: { payout_address: address() } });
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([expect.objectContaining({ field: "payout_address" })]);
    expect(await stack.claimCount()).toBe(before);
  });

  it.each([
    ["malformed JSON", "{not json", "application/json", 400, "malformed_json"],
    ["a JSON array", "[1,2]", "application/json", 400, "invalid_request"],
    ["a JSON string", '"hello"', "application/json", 400, "invalid_request"],
    [
      "a form body",
      "payout_address=0x1",
      "application/x-www-form-urlencoded",
      415,
      "unsupported_media_type",
    ],
    [
      "an oversized body",
      JSON.stringify({ agent_name: "x".repeat(20_000) }),
      "application/json",
      413,
      "body_too_large",
    ],
  ])("answers %s with a problem, not a crash", async (_, rawBody, contentType, status, type) => {
    const before = await stack.claimCount();
    const response = await stack.api("/api/claims", {
      rawBody,
      headers: { "content-type": contentType },
    });
    expect(response.status).toBe(status);
    expect(response.body.type).toBe(`/problems/${type}`);
    expect(JSON.stringify(response.body)).not.toMatch(/at .*\.ts|node_modules|stack/i);
    expect(await stack.claimCount()).toBe(before);
  });
});

describe("GET /api/claims/{claim_id} and its receipt", () => {
  it("shows the claim with what to pay, and the receipt is 409 until completed", async () => {
    const created = await stack.api("/api/claims", { body: { payout_address: user } });
    const claimId = created.body.claim_id as string;

    const status = await stack.api(`/api/claims/${claimId}`);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      claim_id: claimId,
      status: "awaiting_payment",
      amount_due_usdc: created.body.amount_due_usdc,
      payout_tx: null,
      payment: null,
    });

    const receipt = await stack.api(`/api/claims/${claimId}/receipt`);
    expect(receipt.status).toBe(409);
    expect(receipt.body).toMatchObject({
      type: "/problems/receipt_not_ready",
      claim_status: "awaiting_payment",
    });
  });

  it.each(["clm_doesnotexist000000000", "not-a-claim", "clm_%3Cscript%3E"])(
    "answers 404 for the unknown claim id %s",
    async (claimId) => {
      for (const path of [`/api/claims/${claimId}`, `/api/claims/${claimId}/receipt`]) {
        const response = await stack.api(path);
        expect(response.status).toBe(404);
        expect(response.body.type).toBe("/problems/claim_not_found");
      }
      const attach = await stack.api(`/api/claims/${claimId}/tx`, {
        body: { tx_hash: `0x${"ab".repeat(32)}` },
      });
      expect(attach.status).toBe(404);
    },
  );

  it("refuses a malformed tx hash on attach with 400", async () => {
    const created = await stack.api("/api/claims", { body: { payout_address: user } });
    const response = await stack.api(`/api/claims/${created.body.claim_id}/tx`, {
      body: { tx_hash: "0xabc" },
    });
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([expect.objectContaining({ field: "tx_hash" })]);
  });
});

describe("GET /api/payments/{tx_hash}", () => {
  it("says when the chain does not know a transaction", async () => {
    const response = await stack.api(`/api/payments/0x${"cd".repeat(32)}`);
    expect(response.status).toBe(404);
    expect(response.body.type).toBe("/problems/tx_not_found");
  });

  it("refuses a malformed hash", async () => {
    const response = await stack.api("/api/payments/0x1234");
    expect(response.status).toBe(400);
  });
});
