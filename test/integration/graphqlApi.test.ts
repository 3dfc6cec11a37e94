import { buildClientSchema, getIntrospectionQuery, type IntrospectionQuery } from "graphql";
import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildOffer } from "../../api/offer/buildOffer.ts";
import { type CompletedClaim, completeClaims, createClaim } from "../support/completedClaims.ts";
import { type Stack, startStack } from "../support/stack.ts";

/** POST /graphql on the real stack: every root field, the ledger connection and the limits. */

const EMAIL = "graphql-reader@example.com";
let stack: Stack;
let older: CompletedClaim[];
let newer: CompletedClaim[];

interface GraphqlAnswer<Data = Record<string, unknown>> {
  status: number;
  data?: Data;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
  text: string;
}

async function graphql<Data = Record<string, unknown>>(
  query: string,
  variables: Record<string, unknown> = {},
): Promise<GraphqlAnswer<Data>> {
  const response = await fetch(`${stack.service.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  return { status: response.status, text, ...JSON.parse(text) };
}

async function data<Data>(query: string, variables: Record<string, unknown> = {}) {
  const answer = await graphql<Data>(query, variables);
  expect(answer.errors, answer.text).toBeUndefined();
  return answer.data as Data;
}

beforeAll(async () => {
  // Polling claims and paging make hundreds of reads a minute; rate limits have their own tests.
  stack = await startStack({ serviceEnv: { RATE_LIMIT_ENABLED: "false" } });
  older = await completeClaims(stack, [
    { agentName: "gql-alpha" },
    { agentName: "gql-beta", email: EMAIL },
  ]);
  newer = await completeClaims(stack, [{ agentName: "gql-alpha" }, {}]);
});

afterAll(async () => {
  await stack?.stop();
});

interface Connection {
  edges: { cursor: string; node: { claimId: string } }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; endCursor: string | null };
}

const LEDGER = `query Ledger($first: Int, $after: String, $agentName: String, $since: DateTime, $until: DateTime) {
  ledger(first: $first, after: $after, agentName: $agentName, since: $since, until: $until) {
    edges { cursor node { claimId } }
    pageInfo { hasNextPage hasPreviousPage endCursor }
  }
}`;

async function ledgerIds(variables: Record<string, unknown>) {
  const { ledger } = await data<{ ledger: Connection }>(LEDGER, { first: 100, ...variables });
  return ledger.edges.map((edge) => edge.node.claimId);
}

describe("GraphQL /graphql", () => {
  it("serves the offer document, typed", async () => {
    const { offer } = await data<{ offer: Record<string, unknown> }>(`{
      offer { service chainId testnet payTo usdcContract priceUsdc payoutUsdc howItWorks terms
        endpoints x402 { network amountAtomic payTo scheme } document }
    }`);
    const expected = buildOffer(stack.service.config);
    expect(offer).toMatchObject({
      service: expected.service,
      chainId: 8453,
      testnet: false,
      payTo: expected.pay_to,
      usdcContract: expected.usdc_contract,
      priceUsdc: "10",
      payoutUsdc: "1",
      howItWorks: expected.how_it_works,
      terms: expected.terms,
      endpoints: expected.endpoints,
      x402: { network: "eip155:8453", amountAtomic: "10000000", payTo: expected.pay_to },
    });
    expect(offer.document).toEqual(expected);
  });

  it("shows a claim's public fields, never its email", async () => {
    const claim = older[1] as CompletedClaim;
    const { claim: found } = await data<{ claim: Record<string, unknown> }>(
      `query ($id: ID!) { claim(id: $id) { id status flow payoutAddress agentName payoutTx
        paymentTx completedAt amountDueUsdc } }`,
      { id: claim.claimId },
    );
    expect(found).toEqual({
      id: claim.claimId,
      status: "completed",
      flow: "claim",
      payoutAddress: getAddress(claim.payoutAddress),
      agentName: "gql-beta",
      payoutTx: claim.payoutTx,
      paymentTx: claim.paymentTx,
      completedAt: claim.completedAt,
      amountDueUsdc: claim.amountDueUsdc,
    });
    const withEmail = await graphql(`{ claim(id: "${claim.claimId}") { email } }`);
    expect(withEmail.errors?.[0]?.message).toMatch(/Cannot query field "email"/);
    expect(withEmail.text).not.toContain(EMAIL);

    const pending = await createClaim(stack, { agentName: "gql-pending" });
    const open = await data<{ claim: { status: string } }>(
      `{ claim(id: "${pending.claimId}") { status payoutTx } }`,
    );
    expect(open.claim).toEqual({ status: "awaiting_payment", payoutTx: null });
    expect(await data(`{ claim(id: "clm_doesNotExist0000000") { id } }`)).toEqual({ claim: null });
    expect(await data(`{ claim(id: "'; drop table app.claims; --") { id } }`)).toEqual({
      claim: null,
    });
  });

  it("pages the ledger connection newest first, as GET /api/ledger does", async () => {
    const rest = await stack.api<{ entries: { claim_id: string }[] }>("/api/ledger?limit=100");
    const expected = rest.body.entries.map((entry) => entry.claim_id);
    expect(expected).toHaveLength(4);

    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const { ledger }: { ledger: Connection } = await data<{ ledger: Connection }>(LEDGER, {
        first: 3,
        after,
      });
      pages += 1;
      expect(ledger.pageInfo.hasPreviousPage).toBe(after !== null);
      seen.push(...ledger.edges.map((edge) => edge.node.claimId));
      expect(ledger.pageInfo.endCursor).toBe(ledger.edges.at(-1)?.cursor ?? null);
      after = ledger.pageInfo.hasNextPage ? ledger.pageInfo.endCursor : null;
    } while (after);
    expect(pages).toBe(2);
    expect(seen).toEqual(expected);

    const { ledger } = await data<{ ledger: { nodes: Record<string, unknown>[] } }>(
      `{ ledger(first: 1) { nodes { claimId agentName amountUsdc payoutAddress payoutTx
        payoutExplorerUrl flow } } }`,
    );
    const newest = newer.find((claim) => claim.claimId === expected[0]) as CompletedClaim;
    expect(ledger.nodes).toEqual([
      {
        claimId: newest.claimId,
        agentName: newest.agentName ?? null,
        amountUsdc: "1.000000",
        payoutAddress: getAddress(newest.payoutAddress),
        payoutTx: newest.payoutTx,
        payoutExplorerUrl: `${stack.service.config.chain.explorerUrl}/tx/${newest.payoutTx}`,
        flow: "claim",
      },
    ]);
  });

  it("filters the ledger by agent name and time range", async () => {
    const ids = (claims: CompletedClaim[]) => claims.map((claim) => claim.claimId).sort();
    expect((await ledgerIds({ agentName: "gql-alpha" })).sort()).toEqual(
      ids([older[0], newer[0]] as CompletedClaim[]),
    );
    expect(await ledgerIds({ agentName: "nobody" })).toEqual([]);
    const boundary = newer.map((claim) => claim.completedAt).sort()[0];
    expect((await ledgerIds({ since: boundary })).sort()).toEqual(ids(newer));
    expect((await ledgerIds({ until: boundary })).sort()).toEqual(ids(older));
    expect(
      await ledgerIds({ agentName: "gql-alpha", since: boundary, until: "2999-01-01T00:00:00Z" }),
    ).toEqual([newer[0]?.claimId]);
  });

  it("refuses bad ledger arguments with a clean error per argument", async () => {
    for (const [variables, argument] of [
      [{ first: 0 }, "first"],
      [{ first: 101 }, "first"],
      [{ after: "bm90IGEgY3Vyc29y" }, "after"],
      [{ agentName: "" }, "agentName"],
      [{ since: "2030-01-02T00:00:00Z", until: "2030-01-01T00:00:00Z" }, "until"],
    ] as const) {
      const answer = await graphql(LEDGER, variables);
      expect(answer.data?.ledger ?? null, answer.text).toBeNull();
      expect(answer.errors?.[0]?.extensions).toMatchObject({
        code: "BAD_USER_INPUT",
        errors: [{ argument }],
      });
    }
    const badTime = await graphql(LEDGER, { since: "yesterday" });
    expect(badTime.errors?.[0]?.message).toMatch(/ISO 8601/);
  });

  it("sums completed payouts in stats, with a per-day series", async () => {
    const all = [...older, ...newer];
    const received = all
      .map((claim) => Number(claim.amountDueUsdc) * 1e6)
      .reduce((sum, value) => sum + value, 0);
    const { stats } = await data<{ stats: Record<string, unknown> & { daily: unknown[] } }>(`{
      stats { completedPayouts uniquePayoutAddresses usdcReceived usdcPaidOut lastCompletedAt
        daily(days: 3) { day completedPayouts uniquePayoutAddresses usdcPaidOut usdcReceived } }
    }`);
    expect(stats).toMatchObject({
      completedPayouts: 4,
      uniquePayoutAddresses: 4,
      usdcPaidOut: "4.000000",
      usdcReceived: (received / 1e6).toFixed(6),
    });
    const days = stats.daily as { day: string; completedPayouts: number; usdcPaidOut: string }[];
    expect(days).toHaveLength(3);
    expect(days.at(-1)?.day).toBe(new Date().toISOString().slice(0, 10));
    expect(days.reduce((sum, day) => sum + day.completedPayouts, 0)).toBe(4);
    expect(days.map((day) => day.day)).toEqual([...days.map((day) => day.day)].sort());
    const tooMany = await graphql("{ stats { daily(days: 367) { day } } }");
    expect(tooMany.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT" });
  });
});

describe("GraphQL limits and errors", () => {
  function expectRefused(answer: GraphqlAnswer, pattern: RegExp) {
    expect(answer.data ?? null).toBeNull();
    expect(answer.errors?.[0]?.message, answer.text).toMatch(pattern);
    expect(answer.text).not.toMatch(/stack|\.ts\b|node_modules|originalError/);
  }

  it("refuses a query that is too deep", async () => {
    const nested = "ofType { ".repeat(7);
    const deep = `{ __type(name: "Query") { fields { type { ${nested} name ${"} ".repeat(7)} } } } }`;
    expectRefused(await graphql(deep), /depth limit of 8 exceeded/i);
  });

  it("refuses too many aliases", async () => {
    const aliases = Array.from({ length: 11 }, (_, i) => `a${i}: stats { completedPayouts }`);
    expectRefused(await graphql(`{ ${aliases.join(" ")} }`), /aliases limit of 10 exceeded/i);
    expect((await graphql(`{ ${aliases.slice(0, 10).join(" ")} }`)).errors).toBeUndefined();
  });

  it("refuses a query of too many tokens", async () => {
    // __typename: short enough that 1,000 of them stay under the global body limit (16 kB).
    const fields = "__typename ".repeat(1_000);
    expectRefused(await graphql(`{ stats { ${fields} } }`), /token limit of 1000 exceeded/i);
  });

  it("answers introspection: the schema a client tool needs", async () => {
    const schema = buildClientSchema(await data<IntrospectionQuery>(getIntrospectionQuery()));
    const query = schema.getQueryType()?.getFields() ?? {};
    expect(Object.keys(query).sort()).toEqual(["claim", "ledger", "offer", "stats"]);
    expect(Object.keys(schema.getType("LedgerEntry")?.toConfig() ?? {})).toContain("fields");
  });

  it("serves GraphiQL from its own page, with no external assets", async () => {
    const response = await fetch(`${stack.service.url}/graphql`, {
      headers: { accept: "text/html" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    expect(response.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    const page = await response.text();
    expect(page).toContain("YogaGraphiQL.renderYogaGraphiQL");
    expect(page).not.toMatch(/<script[^>]+src=|<link[^>]+href=["']?https?:|@import/i);
    expect(page).not.toMatch(/unpkg\.com|jsdelivr|cdnjs/);
  });

  it("masks internal failures: no internal names reach the client", async () => {
    const sql = stack.service.sql;
    await sql`alter table app.payouts rename to payouts_hidden_by_test`;
    try {
      // Filtered: the unfiltered first page may be served from the cache, not the database.
      const answer = await graphql(
        '{ ledger(first: 1, agentName: "masked") { nodes { claimId } } }',
      );
      expect(answer.errors?.[0]).toMatchObject({
        message: "Unexpected error.",
        extensions: { code: "INTERNAL_SERVER_ERROR" },
      });
      expect(answer.text).not.toMatch(/payouts|relation|postgres|stack/i);
    } finally {
      await sql`alter table app.payouts_hidden_by_test rename to payouts`;
    }
  });
});
