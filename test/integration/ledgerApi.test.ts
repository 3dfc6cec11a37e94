import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readMigrations } from "../../api/db/migrate.ts";
import { type LedgerResponse, ledgerResponse } from "../../api/schemas/ledger.ts";
import { type CompletedClaim, completeClaims, createClaim } from "../support/completedClaims.ts";
import { type Stack, startStack } from "../support/stack.ts";

/**
 * GET /api/ledger on the real stack: claims created, paid on Anvil, indexed by Ponder, matched
 * and paid out by the service, then read back page by page.
 */

const EMAIL = "ledger-reader@example.com";
let stack: Stack;
let older: CompletedClaim[];
let newer: CompletedClaim[];
let pendingClaimId: string;

beforeAll(async () => {
  // Polling claims and paging make hundreds of reads a minute; rate limits have their own tests.
  stack = await startStack({ serviceEnv: { RATE_LIMIT_ENABLED: "false" } });
  // Two rounds, so some payouts are strictly newer than others.
  older = await completeClaims(stack, [
    { agentName: "ledger-alpha" },
    { agentName: "ledger-beta", email: EMAIL },
    {},
  ]);
  newer = await completeClaims(stack, [
    { agentName: "ledger-alpha" },
    { agentName: "ledger-gamma" },
    { agentName: "ledger-delta", email: EMAIL },
  ]);
  pendingClaimId = (await createClaim(stack, { agentName: "ledger-unpaid" })).claimId;
});

afterAll(async () => {
  await stack?.stop();
});

async function ledger(query = "") {
  const response = await stack.api<LedgerResponse>(`/api/ledger${query}`);
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  // The documented schema is strict: any field it does not name (an email, say) fails here.
  return ledgerResponse.parse(response.body);
}

async function allPages(limit: number, start?: string) {
  const pages: LedgerResponse[] = [];
  let cursor = start;
  do {
    const page = await ledger(`?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`);
    expect(page.entries.length).toBeLessThanOrEqual(limit);
    pages.push(page);
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return pages;
}

function isNewestFirst(entries: LedgerResponse["entries"]): boolean {
  return entries.every((entry, index) => {
    const previous = entries[index - 1];
    if (!previous) return true;
    if (previous.completed_at !== entry.completed_at)
      return previous.completed_at > entry.completed_at;
    return previous.claim_id > entry.claim_id;
  });
}

describe("GET /api/ledger", () => {
  it("lists completed payouts newest first, with their transactions and explorer links", async () => {
    const { entries, next_cursor } = await ledger();
    expect(next_cursor).toBeNull();
    expect(entries).toHaveLength(6);
    expect(isNewestFirst(entries)).toBe(true);
    // Every payout of the second round is listed before every payout of the first.
    expect(new Set(entries.slice(0, 3).map((entry) => entry.claim_id))).toEqual(
      new Set(newer.map((claim) => claim.claimId)),
    );
    expect(entries.map((entry) => entry.claim_id)).not.toContain(pendingClaimId);

    const explorer = stack.service.config.chain.explorerUrl;
    for (const claim of [...older, ...newer]) {
      const entry = entries.find((candidate) => candidate.claim_id === claim.claimId);
      expect(entry).toEqual({
        claim_id: claim.claimId,
        agent_name: claim.agentName ?? null,
        flow: "claim",
        payout_address: getAddress(claim.payoutAddress),
        amount_usdc: "1.000000",
        payment_tx: claim.paymentTx,
        payout_tx: claim.payoutTx,
        completed_at: claim.completedAt,
        payment_explorer_url: `${explorer}/tx/${claim.paymentTx}`,
        payout_explorer_url: `${explorer}/tx/${claim.payoutTx}`,
        payout_address_explorer_url: `${explorer}/address/${getAddress(claim.payoutAddress)}`,
      });
    }
  });

  it("never shows an email, even for claims that gave one", async () => {
    const response = await stack.api("/api/ledger?limit=100");
    const text = JSON.stringify(response.body);
    expect(text).toContain("ledger-delta");
    expect(text).not.toContain(EMAIL);
    expect(text).not.toMatch(/email/i);
  });

  it("pages with the cursor without duplicates or gaps", async () => {
    const whole = (await ledger("?limit=100")).entries.map((entry) => entry.claim_id);
    for (const limit of [1, 2, 4]) {
      const pages = await allPages(limit);
      expect(pages).toHaveLength(Math.ceil(whole.length / limit));
      expect(pages.flatMap((page) => page.entries.map((entry) => entry.claim_id))).toEqual(whole);
    }
    // next_url is the next page, ready to follow.
    const first = await ledger("?limit=4&agent_name=ledger-alpha");
    expect(first.next_url).toBeNull();
    const firstOfTwo = await ledger("?limit=3");
    const next = await fetch(firstOfTwo.next_url as string).then((answer) => answer.json());
    expect(next).toEqual(await ledger(`?limit=3&cursor=${firstOfTwo.next_cursor}`));
  });

  it("keeps later pages stable while new payouts arrive", async () => {
    const before = (await ledger("?limit=100")).entries.map((entry) => entry.claim_id);
    const firstPage = await ledger("?limit=2");

    const [latest] = await completeClaims(stack, [{ agentName: "ledger-latest" }]);

    const rest = (await allPages(2, firstPage.next_cursor as string)).flatMap((page) =>
      page.entries.map((entry) => entry.claim_id),
    );
    expect([...firstPage.entries.map((entry) => entry.claim_id), ...rest]).toEqual(before);
    const fresh = await ledger("?limit=2");
    expect(fresh.entries[0]?.claim_id).toBe(latest?.claimId);
  });

  it("filters by agent name and completion time", async () => {
    const alpha = await ledger("?agent_name=ledger-alpha");
    expect(alpha.entries.map((entry) => entry.claim_id).sort()).toEqual(
      [older[0]?.claimId, newer[0]?.claimId].sort(),
    );

    const boundary = newer.map((claim) => claim.completedAt).sort()[0] as string;
    const since = await ledger(`?limit=100&since=${boundary}`);
    const until = await ledger(`?limit=100&until=${boundary}`);
    const sinceIds = since.entries.map((entry) => entry.claim_id);
    const untilIds = until.entries.map((entry) => entry.claim_id);
    for (const claim of newer) expect(sinceIds).toContain(claim.claimId);
    expect(untilIds.sort()).toEqual(older.map((claim) => claim.claimId).sort());
  });

  it("accepts limits from 1 to 100 only", async () => {
    expect((await ledger("?limit=1")).entries).toHaveLength(1);
    expect((await ledger("?limit=100")).limit).toBe(100);
    expect((await ledger()).limit).toBe(20);
    for (const limit of ["0", "101", "-1", "1.5", "ten", ""]) {
      const response = await stack.api(`/api/ledger?limit=${limit}`);
      expect(response.status, `limit=${limit}`).toBe(400);
      expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({
        type: "/problems/invalid_request",
        status: 400,
        errors: [{ field: "limit" }],
      });
    }
  });

  it("refuses a cursor it did not issue, and an empty time range", async () => {
    const valid = (await ledger("?limit=1")).next_cursor as string;
    const forged = [
      "not-a-cursor",
      Buffer.from('["yesterday","clm_x"]').toString("base64url"),
      Buffer.from("{}").toString("base64url"),
      valid.slice(0, -3),
      `${valid}%00`,
    ];
    for (const cursor of forged) {
      const response = await stack.api(`/api/ledger?cursor=${cursor}`);
      expect(response.status, cursor).toBe(400);
      expect(response.body).toMatchObject({
        type: "/problems/invalid_request",
        errors: [{ field: "cursor", message: expect.stringContaining("cursor") }],
      });
    }
    const backwards = await stack.api("/api/ledger?since=2030-01-02&until=2030-01-01");
    expect(backwards.status).toBe(400);
    expect(backwards.body).toMatchObject({ errors: [{ field: "until" }] });
    const badTime = await stack.api("/api/ledger?since=yesterday");
    expect(badTime.body).toMatchObject({ errors: [{ field: "since" }] });
  });
});

describe("agent names on the ledger", () => {
  // "Café agent" typed two ways: é as one code point (NFC) and as e + a combining accent.
  const composed = "Caf\u00E9 agent";
  const decomposed = "Cafe\u0301 agent";

  it("are stored in NFC, and either spelling finds them, on REST, GraphQL and the page", async () => {
    const [claim] = await completeClaims(stack, [{ agentName: decomposed }]);
    const mine = (entries: LedgerResponse["entries"]) =>
      entries.filter((entry) => entry.claim_id === claim?.claimId);

    for (const spelling of [composed, decomposed]) {
      const found = await ledger(`?agent_name=${encodeURIComponent(spelling)}`);
      expect(mine(found.entries), spelling).toHaveLength(1);
      expect(found.entries.map((entry) => entry.agent_name)).toEqual([composed]);

      const graphql = await fetch(`${stack.service.url}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          query:
            "query ($name: String) { ledger(agentName: $name) { nodes { claimId agentName } } }",
          variables: { name: spelling },
        }),
      });
      const nodes = ((await graphql.json()) as { data: { ledger: { nodes: unknown[] } } }).data
        .ledger.nodes;
      expect(nodes).toEqual([{ claimId: claim?.claimId, agentName: composed }]);

      const page = await fetch(
        `${stack.service.url}/ledger?agent_name=${encodeURIComponent(spelling)}`,
      );
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain(claim?.payoutTx);
      expect(html).toContain(composed);
    }
    const [row] = await stack.service.sql<{ agent_name: string }[]>`
      select agent_name from app.claims where id = ${claim?.claimId as string}`;
    expect(row?.agent_name).toBe(composed);
  });

  it("with an invisible character are refused as a filter and on x402, as on claims", async () => {
    for (const name of ["ali\u200Bce", "ali\u2060ce", "alice\u{E0041}"]) {
      const filter = await stack.api(`/api/ledger?agent_name=${encodeURIComponent(name)}`);
      expect(filter.status).toBe(400);
      expect(filter.body).toMatchObject({ errors: [{ field: "agent_name" }] });
      const x402 = await stack.api("/api/x402/earn", {
        body: { payout_address: stack.chain.users[0]?.address, agent_name: name },
      });
      expect(x402.status).toBe(400);
      expect(x402.body).toMatchObject({ errors: [{ field: "agent_name" }] });
    }
  });

  it("stored before NFC are brought to NFC by migration 0009", async () => {
    const claimId = older[0]?.claimId as string;
    const sql = stack.service.sql;
    await sql`update app.claims set agent_name = ${decomposed} where id = ${claimId}`;
    const migration = (await readMigrations()).find((candidate) => candidate.id === 9);
    expect(migration?.name).toBe("agent_names_nfc");
    await sql.unsafe(migration?.sql as string);
    const [row] = await sql<{ agent_name: string }[]>`
      select agent_name from app.claims where id = ${claimId}`;
    expect(row?.agent_name).toBe(composed);
  });
});
