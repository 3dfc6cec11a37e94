import { encodeLedgerCursor } from "../ledger/ledgerCursor.ts";
import { ledgerEntryView } from "../ledger/ledgerEntryView.ts";
import { listLedgerEntries } from "../ledger/listLedgerEntries.ts";
import { LEDGER_DEFAULT_LIMIT, type LedgerEntryJson, ledgerQuery } from "../schemas/ledger.ts";
import { badUserInput, builder } from "./builder.ts";
import { ClaimFlow } from "./claimType.ts";

/**
 * `ledger`: completed payouts as a Relay connection, newest first, forward paging only
 * (`first`/`after`), filtered by agent name and completion time. Cursors are the same opaque
 * cursors as GET /api/ledger's `next_cursor`, and the arguments are checked by the same zod
 * schema (`ledgerQuery`).
 */

interface LedgerEdgeShape {
  cursor: string;
  node: LedgerEntryJson;
}

interface LedgerConnectionShape {
  edges: LedgerEdgeShape[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
}

const LedgerEntryType = builder.objectRef<LedgerEntryJson>("LedgerEntry").implement({
  description: "One completed payout. Emails are never shown.",
  fields: (t) => ({
    claimId: t.exposeID("claim_id"),
    agentName: t.exposeString("agent_name", { nullable: true }),
    flow: t.field({ type: ClaimFlow, resolve: (entry) => entry.flow }),
    payoutAddress: t.exposeString("payout_address", { description: "EIP-55 checksummed." }),
    amountUsdc: t.exposeString("amount_usdc", { description: "Payout in USDC, six decimals." }),
    paymentTx: t.exposeString("payment_tx", { nullable: true }),
    payoutTx: t.exposeString("payout_tx"),
    completedAt: t.field({ type: "DateTime", resolve: (entry) => new Date(entry.completed_at) }),
    paymentExplorerUrl: t.exposeString("payment_explorer_url", { nullable: true }),
    payoutExplorerUrl: t.exposeString("payout_explorer_url"),
    payoutAddressExplorerUrl: t.exposeString("payout_address_explorer_url"),
  }),
});

const LedgerEdge = builder.objectRef<LedgerEdgeShape>("LedgerEdge").implement({
  fields: (t) => ({
    cursor: t.exposeString("cursor"),
    node: t.field({ type: LedgerEntryType, resolve: (edge) => edge.node }),
  }),
});

const PageInfo = builder.objectRef<LedgerConnectionShape>("PageInfo").implement({
  fields: (t) => ({
    hasNextPage: t.exposeBoolean("hasNextPage"),
    hasPreviousPage: t.exposeBoolean("hasPreviousPage"),
    startCursor: t.string({ nullable: true, resolve: (page) => page.edges[0]?.cursor ?? null }),
    endCursor: t.string({ nullable: true, resolve: (page) => page.edges.at(-1)?.cursor ?? null }),
  }),
});

const LedgerConnection = builder.objectRef<LedgerConnectionShape>("LedgerConnection").implement({
  fields: (t) => ({
    edges: t.field({ type: [LedgerEdge], resolve: (page) => page.edges }),
    nodes: t.field({
      type: [LedgerEntryType],
      resolve: (page) => page.edges.map((edge) => edge.node),
    }),
    pageInfo: t.field({ type: PageInfo, resolve: (page) => page }),
  }),
});

const ARGUMENT_NAMES: Record<string, string> = {
  limit: "first",
  cursor: "after",
  agent_name: "agentName",
};

builder.queryField("ledger", (t) =>
  t.field({
    type: LedgerConnection,
    description: "Completed payouts, newest first.",
    args: {
      first: t.arg.int({ defaultValue: LEDGER_DEFAULT_LIMIT, description: "1 to 100." }),
      after: t.arg.string({ description: "An endCursor (or edge cursor) of a previous page." }),
      agentName: t.arg.string({ description: "Only claims with exactly this agent name." }),
      since: t.arg({ type: "DateTime", description: "Completed at or after." }),
      until: t.arg({ type: "DateTime", description: "Completed before." }),
    },
    resolve: async (_root, args, { deps }) => {
      const parsed = ledgerQuery.safeParse({
        limit: args.first ?? LEDGER_DEFAULT_LIMIT,
        cursor: args.after ?? undefined,
        agent_name: args.agentName ?? undefined,
        since: args.since?.toISOString(),
        until: args.until?.toISOString(),
      });
      if (!parsed.success) {
        const errors = parsed.error.issues.map((issue) => {
          const field = String(issue.path[0] ?? "");
          return { argument: ARGUMENT_NAMES[field] ?? field, message: issue.message };
        });
        throw badUserInput(
          `The ledger arguments are not valid: ${errors.map((e) => `${e.argument} ${e.message}`).join("; ")}`,
          errors,
        );
      }
      const query = parsed.data;
      const page = await listLedgerEntries(deps.sql, {
        limit: query.limit,
        after: query.cursor,
        agentName: query.agent_name,
        since: query.since,
        until: query.until,
      });
      return {
        edges: page.entries.map((entry) => ({
          cursor: encodeLedgerCursor(entry.cursor),
          node: ledgerEntryView(deps.config, entry),
        })),
        hasNextPage: page.nextCursor !== null,
        hasPreviousPage: query.cursor !== undefined,
      };
    },
  }),
);
