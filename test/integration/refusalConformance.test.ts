import type { Message, Part, Task } from "@a2a-js/sdk";
import { type Client as A2aClient, ClientFactory } from "@a2a-js/sdk/client";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAIL_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { dataPart, userMessage } from "../support/a2aMessages.ts";
import { type CaughtMail, claimIdIn, freshSender } from "../support/mail.ts";
import { type MailStack, startMailStack } from "../support/mailService.ts";
import type { Stack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";

/**
 * One refusal, one code (docs/surfaces.md#one-refusal-one-code): the same bad input sent to
 * every surface, REST, GraphQL, MCP (the official SDK client), A2A (the official SDK client),
 * the pages and mail (real SMTP in, the reply read back), on one stack. Each row is an input
 * and the catalog code it must be refused with; each cell reads the code the surface shows
 * (problem+json `type`, GraphQL `extensions.code`, the MCP tool error's `code`, the A2A error
 * data's `code`, the page's `data-reason`, the mail reply's `(reason: …)` or help text).
 *
 * A cell is one of three: the code the surface shows, which must be the row's; `not offered`,
 * with a check that the surface really has no way to take the input (so no cell is skipped in
 * silence); or `differs`, a surface known to answer another code, with where that is decided
 * (a finding, kept visible: the test fails when it changes, so the table is then corrected).
 */

const UNKNOWN_CLAIM = "clm_AAAAAAAAAAAAAAAAAAAAAA";
const MALFORMED_CLAIM = "not-a-claim";
const MALFORMED_TX = "0x1234";
/** A well-formed hash of no transaction. */
const UNKNOWN_TX = `0x${"ab".repeat(32)}`;
/** 0x976EA74026E726554dB657fA54763abd0C3a0aa9 with one letter's case flipped. */
const BAD_CHECKSUM = "0x976EA74026E726554dB657fA54763abd0C3a0aA9";
/** The tools and skills there are: none of them explains a payment by its hash. */
const AGENT_OPERATIONS = [
  "attach_payment_tx",
  "create_claim",
  "earn_with_x402",
  "get_claim",
  "get_ledger",
  "get_offer",
  "get_receipt",
];
const GRAPHQL_QUERIES = ["claim", "ledger", "offer", "stats"];

let mailStack: MailStack;
let stack: Stack;
let mcp: McpClient;
let a2a: A2aClient;
/** An open claim (REST), for the attach rows. */
let openClaimId: string;
/** A mail claim's thread, for the attach rows by mail. */
let thread: { from: string; sent: string; instructions: string };
/** A mined USDC transfer between two wallets that are not pay_to: it pays no claim. */
let foreignTransfer: string;

beforeAll(async () => {
  mailStack = await startMailStack({
    RATE_LIMIT_ENABLED: "false",
    MAIL_REPLIES_PER_DOMAIN_PER_HOUR: "1000",
  });
  stack = mailStack.stack;
  mcp = new McpClient({ name: "refusal-conformance", version: "1.0.0" });
  await mcp.connect(
    new StreamableHTTPClientTransport(
      new URL(`${stack.service.url.replace("127.0.0.1", "localhost")}/mcp`),
    ),
  );
  a2a = await new ClientFactory().createFromUrl(stack.service.url);
  openClaimId = (await stack.createClaim(freshAddress())).claim_id;
  foreignTransfer = await stack.chain.transferUsdc(
    stack.chain.user(5),
    stack.chain.user(6).address,
    USDC,
  );
  const from = freshSender("thread");
  const sent = await mailStack.send({ from, subject: "earn", text: freshAddress() });
  const [instructions] = await mailStack.catcher.waitFor(from);
  claimIdIn(instructions);
  thread = { from, sent: sent.messageId, instructions: instructions?.messageId ?? "" };
});

afterAll(async () => {
  await mcp?.close();
  await mailStack?.stop();
});

function freshAddress(): string {
  return privateKeyToAccount(generatePrivateKey()).address;
}

/** `code`, or `code:reason` when the refusal names a reason (tx_not_qualifying's). */
function codeOf(error: Record<string, unknown> | undefined, what: unknown): string {
  if (!error || typeof error.code !== "string") return `no refusal: ${JSON.stringify(what)}`;
  return typeof error.reason === "string" ? `${error.code}:${error.reason}` : error.code;
}

// ── the surfaces, each read as a client reads it ──

async function rest(path: string, body?: unknown): Promise<string> {
  const response = await stack.api(path, body === undefined ? {} : { body });
  const type = typeof response.body.type === "string" ? response.body.type : "";
  const code = /^\/problems\/(\w+)$/.exec(type)?.[1];
  return codeOf(code ? { ...response.body, code } : undefined, response.body);
}

async function graphql(query: string): Promise<string> {
  const response = await fetch(`${stack.service.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ query }),
  });
  const answer = (await response.json()) as {
    data?: Record<string, unknown> | null;
    errors?: { message: string; extensions?: Record<string, unknown> }[];
  };
  const [error] = answer.errors ?? [];
  if (error) {
    const code = error.extensions?.code;
    // Figures (a limit, a cost) as N: the table names the kind of refusal, not the weights.
    return typeof code === "string" ? code : `no code: ${error.message.replace(/\d+/g, "N")}`;
  }
  const values = Object.values(answer.data ?? {});
  return values.length === 1 && values[0] === null
    ? "null, no error"
    : `no refusal: ${JSON.stringify(answer)}`;
}

async function mcpTool(name: string, args: Record<string, unknown>): Promise<string> {
  const result = (await mcp.callTool({ name, arguments: args })) as {
    isError?: boolean;
    structuredContent?: { error?: Record<string, unknown> };
  };
  return codeOf(result.isError ? result.structuredContent?.error : undefined, result);
}

/** A2A: a rejected task's status message, or the read skills' answer message, carries the error. */
async function a2aSkill(data: Record<string, unknown>): Promise<string> {
  const answer = (await a2a.sendMessage({ message: userMessage([dataPart(data)]) } as never)) as
    | Task
    | Message;
  const parts: Part[] = "status" in answer ? (answer.status?.message?.parts ?? []) : answer.parts;
  const error = parts
    .map((part) => (part.content?.$case === "data" ? part.content.value : undefined))
    .find((value) => value && typeof value === "object" && "error" in value) as
    | { error: Record<string, unknown> }
    | undefined;
  return codeOf(error?.error, answer);
}

/** A page's refusal names its code in `data-reason` (api/pages/renderProblemPage.ts). */
async function page(path: string, form?: Record<string, string>): Promise<string> {
  const response = await fetch(`${stack.service.url}${path}`, {
    redirect: "manual",
    ...(form
      ? {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(form).toString(),
        }
      : {}),
  });
  const text = await response.text();
  const code = /data-reason="(\w+)"/.exec(text)?.[1];
  return code ?? `no refusal: ${response.status} ${response.headers.get("location") ?? ""}`;
}

/** The code a reply shows: a refusal's `(reason: …)` line, or the help text of MAIL_REASONS. */
function mailCode(mail: CaughtMail): string {
  const refusal = /\(reason: (\w+)(?:, (\w+))?\)/.exec(mail.text);
  if (refusal) return refusal[2] ? `${refusal[1]}:${refusal[2]}` : (refusal[1] as string);
  const help = Object.entries(MAIL_REASONS).find(([, words]) => mail.text.startsWith(words));
  if (help) return help[0];
  if (/^Your claim clm_\S+ is open\./.test(mail.text)) return "no refusal: a claim was created";
  if (/^Your claim clm_\S+ is /.test(mail.text)) return "no refusal: the claim's status";
  return `unread reply: ${mail.text.slice(0, 120)}`;
}

/** Mails `message` to the intake and reads the code of the reply it gets. */
async function mail(message: { from?: string; text: string; thread?: boolean }): Promise<string> {
  const reply = await mailStack.sendAndReadReply({
    from: message.from ?? freshSender("conformance"),
    subject: message.thread ? "Re: earn" : "earn",
    text: message.text,
    ...(message.thread
      ? { inReplyTo: thread.instructions, references: [thread.sent, thread.instructions] }
      : {}),
  });
  return mailCode(reply);
}

// ── "not offered", checked ──

async function graphqlSchema() {
  const response = await fetch(`${stack.service.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({
      query: "{ __schema { mutationType { name } queryType { fields { name } } } }",
    }),
  });
  const { data } = (await response.json()) as {
    data: {
      __schema: {
        mutationType: { name: string } | null;
        queryType: { fields: { name: string }[] };
      };
    };
  };
  return data.__schema;
}

/** GraphQL reads only: no mutation creates a claim or attaches a transaction. */
const graphqlHasNoMutations = {
  notOffered: "GraphQL has no mutations",
  check: async () => expect((await graphqlSchema()).mutationType).toBeNull(),
};

/** GraphQL's queries are offer, claim, ledger and stats: none takes a transaction hash. */
const graphqlHasNoPaymentQuery = {
  notOffered: "GraphQL has no payment query",
  check: async () =>
    expect((await graphqlSchema()).queryType.fields.map((field) => field.name).sort()).toEqual(
      GRAPHQL_QUERIES,
    ),
};

const agentsHaveNoPaymentLookup = {
  mcp: {
    notOffered: "no MCP tool explains a payment",
    check: async () =>
      expect((await mcp.listTools()).tools.map((tool) => tool.name).sort()).toEqual(
        AGENT_OPERATIONS,
      ),
  },
  a2a: {
    notOffered: "no A2A skill explains a payment",
    check: async () =>
      expect((await a2a.getAgentCard()).skills.map((skill) => skill.id).sort()).toEqual(
        AGENT_OPERATIONS,
      ),
  },
};

/** The pages attach nothing: a claim's page has no transaction field and no form to post one. */
const pagesAttachNothing = {
  notOffered: "no page attaches a transaction",
  check: async () => {
    const html = await (await fetch(`${stack.service.url}/claims/${openClaimId}`)).text();
    expect(html).toContain(openClaimId);
    expect(html).not.toMatch(/name="tx_hash"|<form[^>]*action="\/claims\/[^"]*\/tx"/);
  },
};

/**
 * Mail names no claim, payment or ledger query: a claim is named only by the thread (the
 * service's own Message-IDs, for the claim's own address). A message carrying only such an
 * input, even in a thread forged to name the claim, is read as a new message without a payout
 * address.
 */
function mailTakesNo(input: string, claimInThread?: string) {
  return {
    notOffered: "mail reads only payout addresses, tx hashes and agent names",
    check: async () => {
      const forged = claimInThread ? `<pae.1.${claimInThread}@pay-and-earn.test>` : undefined;
      const reply = await mailStack.sendAndReadReply({
        from: freshSender("not-offered"),
        subject: "Re: earn",
        text: input,
        ...(forged ? { inReplyTo: forged, references: [forged] } : {}),
      });
      expect(mailCode(reply)).toBe("no_address");
    },
  };
}

// ── the table ──

const SURFACES = ["REST", "GraphQL", "MCP", "A2A", "pages", "mail"] as const;
type Surface = (typeof SURFACES)[number];

type Cell =
  /** The code this surface shows for the row's input. */
  | (() => Promise<string>)
  /** The surface cannot take the input; `check` proves it. */
  | { notOffered: string; check: () => Promise<void> }
  /** A known difference: the surface shows `differs`, decided where `decidedIn` says. */
  | { differs: string; decidedIn: string; shows: () => Promise<string> };

interface Row {
  input: string;
  code: string;
  on: Record<Surface, Cell>;
}

const ROWS: Row[] = [
  {
    input: "a payout address whose checksum is wrong",
    code: "invalid_request",
    on: {
      REST: () => rest("/api/claims", { payout_address: BAD_CHECKSUM }),
      GraphQL: graphqlHasNoMutations,
      MCP: () => mcpTool("create_claim", { payout_address: BAD_CHECKSUM }),
      A2A: () => a2aSkill({ skill: "create_claim", payout_address: BAD_CHECKSUM }),
      pages: () => page("/claims", { payout_address: BAD_CHECKSUM }),
      mail: () => mail({ text: `please pay me at ${BAD_CHECKSUM}` }),
    },
  },
  {
    input: "a payout address that is too short (0x123)",
    code: "invalid_request",
    on: {
      REST: () => rest("/api/claims", { payout_address: "0x123" }),
      GraphQL: graphqlHasNoMutations,
      MCP: () => mcpTool("create_claim", { payout_address: "0x123" }),
      A2A: () => a2aSkill({ skill: "create_claim", payout_address: "0x123" }),
      pages: () => page("/claims", { payout_address: "0x123" }),
      mail: {
        differs: "no_address",
        decidedIn:
          "api/mail/readRequest.ts: only 0x and 40 hex digits are read as an address, the rest is words",
        shows: () => mail({ text: "please pay me at 0x123" }),
      },
    },
  },
  ...(["pay_to", "the payout wallet"] as const).map(
    (whose): Row => ({
      input: `the service's own address (${whose}) as payout address`,
      code: "invalid_request",
      on: {
        REST: () => rest("/api/claims", { payout_address: own(whose) }),
        GraphQL: graphqlHasNoMutations,
        MCP: () => mcpTool("create_claim", { payout_address: own(whose) }),
        A2A: () => a2aSkill({ skill: "create_claim", payout_address: own(whose) }),
        pages: () => page("/claims", { payout_address: own(whose) }),
        mail: {
          differs: "no_address",
          decidedIn:
            "api/mailRequests/handleMailRequest.ts newClaim: the service's addresses (serviceAddresses) are never taken from a mail",
          shows: () => mail({ text: `please pay me at ${own(whose)}` }),
        },
      },
    }),
  ),
  {
    input: "an agent name over 64 characters",
    code: "invalid_request",
    on: {
      REST: () => rest("/api/claims", { payout_address: freshAddress(), agent_name: LONG_NAME }),
      GraphQL: graphqlHasNoMutations,
      MCP: () => mcpTool("create_claim", { payout_address: freshAddress(), agent_name: LONG_NAME }),
      A2A: () =>
        a2aSkill({ skill: "create_claim", payout_address: freshAddress(), agent_name: LONG_NAME }),
      pages: () => page("/claims", { payout_address: freshAddress(), agent_name: LONG_NAME }),
      mail: () => mail({ text: `${freshAddress()}\nagent: ${LONG_NAME}` }),
    },
  },
  {
    input: "a well-formed claim id that names no claim (read)",
    code: "claim_not_found",
    on: {
      REST: () => rest(`/api/claims/${UNKNOWN_CLAIM}`),
      GraphQL: {
        differs: "null, no error",
        decidedIn: "api/graphql/claimType.ts: claim(id) is nullable, null when there is none",
        shows: () => graphql(`{ claim(id: "${UNKNOWN_CLAIM}") { id } }`),
      },
      MCP: () => mcpTool("get_claim", { claim_id: UNKNOWN_CLAIM }),
      A2A: () => a2aSkill({ skill: "get_claim", claim_id: UNKNOWN_CLAIM }),
      pages: () => page(`/claims/${UNKNOWN_CLAIM}`),
      mail: mailTakesNo(UNKNOWN_CLAIM, UNKNOWN_CLAIM),
    },
  },
  {
    input: "a well-formed claim id that names no claim (attach a tx)",
    code: "claim_not_found",
    on: {
      REST: () => rest(`/api/claims/${UNKNOWN_CLAIM}/tx`, { tx_hash: foreignTransfer }),
      GraphQL: graphqlHasNoMutations,
      MCP: () =>
        mcpTool("attach_payment_tx", { claim_id: UNKNOWN_CLAIM, tx_hash: foreignTransfer }),
      A2A: () =>
        a2aSkill({ skill: "attach_payment_tx", claim_id: UNKNOWN_CLAIM, tx_hash: foreignTransfer }),
      pages: pagesAttachNothing,
      mail: mailTakesNo(UNKNOWN_TX, UNKNOWN_CLAIM),
    },
  },
  {
    input: "a malformed claim id",
    code: "claim_not_found",
    on: {
      REST: () => rest(`/api/claims/${MALFORMED_CLAIM}`),
      GraphQL: {
        differs: "null, no error",
        decidedIn: "api/graphql/claimType.ts: claim(id) is nullable, null when there is none",
        shows: () => graphql(`{ claim(id: "${MALFORMED_CLAIM}") { id } }`),
      },
      MCP: () => mcpTool("get_claim", { claim_id: MALFORMED_CLAIM }),
      A2A: () => a2aSkill({ skill: "get_claim", claim_id: MALFORMED_CLAIM }),
      pages: () => page(`/claims/${MALFORMED_CLAIM}`),
      mail: mailTakesNo(MALFORMED_CLAIM, MALFORMED_CLAIM),
    },
  },
  {
    input: "a malformed tx hash to attach",
    code: "invalid_request",
    on: {
      REST: () => rest(`/api/claims/${openClaimId}/tx`, { tx_hash: MALFORMED_TX }),
      GraphQL: graphqlHasNoMutations,
      MCP: () => mcpTool("attach_payment_tx", { claim_id: openClaimId, tx_hash: MALFORMED_TX }),
      A2A: () =>
        a2aSkill({ skill: "attach_payment_tx", claim_id: openClaimId, tx_hash: MALFORMED_TX }),
      pages: pagesAttachNothing,
      mail: {
        differs: "no refusal: the claim's status",
        decidedIn:
          "api/mail/readRequest.ts: only 0x and 64 hex digits are read as a tx hash; a reply naming none gets the claim's status",
        shows: () =>
          mail({ from: thread.from, thread: true, text: `Paid, the tx is ${MALFORMED_TX}` }),
      },
    },
  },
  {
    input: "a mined tx hash with no transfer to pay_to, to attach",
    code: "tx_not_qualifying:no_transfer_to_pay_to",
    on: {
      REST: () => rest(`/api/claims/${openClaimId}/tx`, { tx_hash: foreignTransfer }),
      GraphQL: graphqlHasNoMutations,
      MCP: () => mcpTool("attach_payment_tx", { claim_id: openClaimId, tx_hash: foreignTransfer }),
      A2A: () =>
        a2aSkill({ skill: "attach_payment_tx", claim_id: openClaimId, tx_hash: foreignTransfer }),
      pages: pagesAttachNothing,
      mail: () =>
        mail({ from: thread.from, thread: true, text: `Paid, the tx is ${foreignTransfer}` }),
    },
  },
  {
    input: "a tx hash the chain does not know, to explain",
    code: "tx_not_found",
    on: {
      REST: () => rest(`/api/payments/${UNKNOWN_TX}`),
      GraphQL: graphqlHasNoPaymentQuery,
      MCP: agentsHaveNoPaymentLookup.mcp,
      A2A: agentsHaveNoPaymentLookup.a2a,
      pages: () => page(`/payments/${UNKNOWN_TX}`),
      mail: mailTakesNo(UNKNOWN_TX),
    },
  },
  {
    input: "a malformed tx hash, to explain",
    code: "invalid_request",
    on: {
      REST: () => rest(`/api/payments/${MALFORMED_TX}`),
      GraphQL: graphqlHasNoPaymentQuery,
      MCP: agentsHaveNoPaymentLookup.mcp,
      A2A: agentsHaveNoPaymentLookup.a2a,
      pages: {
        differs: "not_found",
        decidedIn:
          "api/pages/paymentPages.ts explain: a path segment that is no hash is a 404 page (docs/surfaces.md#pages)",
        shows: () => page(`/payments/${MALFORMED_TX}`),
      },
      mail: mailTakesNo(MALFORMED_TX),
    },
  },
  {
    input: "a ledger page size of 101 (at most 100)",
    code: "invalid_request",
    on: {
      REST: () => rest("/api/ledger?limit=101"),
      GraphQL: {
        differs: "BAD_USER_INPUT",
        decidedIn:
          "api/graphql/builder.ts badUserInput: argument errors carry GraphQL's conventional code",
        shows: () => graphql("{ ledger(first: 101) { edges { cursor } } }"),
      },
      MCP: () => mcpTool("get_ledger", { limit: 101 }),
      A2A: () => a2aSkill({ skill: "get_ledger", limit: 101 }),
      pages: () => page("/ledger?limit=101"),
      mail: mailTakesNo("ledger limit=101"),
    },
  },
  {
    input: "a ledger page size of 1000",
    code: "invalid_request",
    on: {
      REST: () => rest("/api/ledger?limit=1000"),
      GraphQL: {
        differs: "no code: Syntax Error: Query Cost limit of N exceeded, found N.",
        decidedIn:
          "api/graphql/graphqlRoutes.ts: graphql-armor's cost limit refuses the query before its arguments are checked, with no code",
        shows: () => graphql("{ ledger(first: 1000) { edges { cursor } } }"),
      },
      MCP: () => mcpTool("get_ledger", { limit: 1000 }),
      A2A: () => a2aSkill({ skill: "get_ledger", limit: 1000 }),
      pages: () => page("/ledger?limit=1000"),
      mail: mailTakesNo("ledger limit=1000"),
    },
  },
];

const LONG_NAME = "a".repeat(65);

function own(whose: "pay_to" | "the payout wallet"): string {
  return whose === "pay_to" ? stack.chain.payTo.address : stack.service.config.payout.address;
}

describe("one bad input, one refusal code on every surface", () => {
  for (const row of ROWS) {
    it(row.input, async () => {
      const seen: Record<string, string> = {};
      const expected: Record<string, string> = {};
      for (const surface of SURFACES) {
        const cell = row.on[surface];
        if (typeof cell === "function") {
          seen[surface] = await cell();
          expected[surface] = row.code;
        } else if ("notOffered" in cell) {
          await cell.check();
          seen[surface] = expected[surface] = "not offered";
        } else {
          seen[surface] = await cell.shows();
          expected[surface] = cell.differs;
        }
      }
      expect(seen, row.input).toEqual(expected);
    });
  }

  it("says where every known difference is decided; every row's code is shown somewhere", () => {
    for (const row of ROWS) {
      const cells = SURFACES.map((surface) => row.on[surface]);
      expect(
        cells.some((cell) => typeof cell === "function"),
        row.input,
      ).toBe(true);
      for (const cell of cells) {
        if (typeof cell !== "function" && "differs" in cell) {
          expect(cell.decidedIn, row.input).toMatch(/^api\/\S+\.ts/);
          expect(cell.differs, row.input).not.toBe(row.code);
        }
      }
    }
  });
});
