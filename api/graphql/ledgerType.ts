import { explorerAddress, explorerTx } from "../chain/explorerLinks.ts";
import { callbackIterator } from "../events/callbackIterator.ts";
import type { LedgerEntry } from "../ledger/listLedgerEntries.ts";
import { formatUsdcFixed } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import { LEDGER_DEFAULT_LIMIT } from "../schemas/ledger.ts";
import { encodeLedgerCursor } from "../schemas/ledgerCursor.ts";
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
  node: LedgerEntry;
}

interface LedgerConnectionShape {
  edges: LedgerEdgeShape[];
  hasNextPage: boolean;
  hasPreviousPage: boolean;
}

const LedgerEntryType = builder.objectRef<LedgerEntry>("LedgerEntry").implement({
  description: "One completed payout. Emails are never shown.",
  fields: (t) => ({
    claimId: t.exposeID("claimId"),
    agentName: t.exposeString("agentName", { nullable: true }),
    flow: t.field({ type: ClaimFlow, resolve: (entry) => entry.flow }),
    payoutAddress: t.string({
      description: "EIP-55 checksummed.",
      resolve: (entry) => checksummed(entry.payoutAddress),
    }),
    amountUsdc: t.string({
      description: "Payout in USDC, six decimals.",
      resolve: (entry) => formatUsdcFixed(entry.amount),
    }),
    paymentTx: t.exposeString("paymentTx", { nullable: true }),
    payoutTx: t.exposeString("payoutTx"),
    completedAt: t.field({ type: "DateTime", resolve: (entry) => entry.completedAt }),
    paymentExplorerUrl: t.string({
      nullable: true,
      resolve: (entry, _args, { core }) => explorerTx(core.config, entry.paymentTx),
    }),
    payoutExplorerUrl: t.string({
      resolve: (entry, _args, { core }) => explorerTx(core.config, entry.payoutTx) as string,
    }),
    payoutAddressExplorerUrl: t.string({
      resolve: (entry, _args, { core }) =>
        explorerAddress(core.config, checksummed(entry.payoutAddress)),
    }),
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
    resolve: async (_root, args, { core }) => {
      const result = await core.listLedger({
        limit: args.first ?? LEDGER_DEFAULT_LIMIT,
        cursor: args.after ?? undefined,
        agent_name: args.agentName ?? undefined,
        since: args.since?.toISOString(),
        until: args.until?.toISOString(),
      });
      if (result.type !== "page") {
        const errors = result.errors.map((error) => {
          const field = error.field.split(".")[0] ?? "";
          return { argument: ARGUMENT_NAMES[field] ?? field, message: error.message };
        });
        throw badUserInput(
          `The ledger arguments are not valid: ${errors.map((e) => `${e.argument} ${e.message}`).join("; ")}`,
          errors,
        );
      }
      const { query, page } = result;
      return {
        edges: page.entries.map((entry) => ({
          cursor: encodeLedgerCursor(entry.cursor),
          node: entry,
        })),
        hasNextPage: page.nextCursor !== null,
        hasPreviousPage: query.cursor !== undefined,
      };
    },
  }),
);

builder.subscriptionField("ledgerEntryAdded", (t) =>
  t.field({
    type: LedgerEntryType,
    description:
      "Each entry as it is added to the ledger (a claim completed), from now on; over SSE (Accept: text/event-stream). Ends after EVENT_STREAM_MAX_SECONDS; counted with claimChanged against EVENT_STREAMS_PER_CLIENT (docs/events.md#live-streams).",
    args: {
      agentName: t.arg.string({ description: "Only claims with exactly this agent name." }),
    },
    subscribe: async (_root, { agentName }, { core, client }) => {
      const opened = await core.openLedgerStream(client, agentName ?? undefined);
      if (opened.type === "invalid_request") {
        const errors = opened.errors.map((error) => ({
          argument: "agentName",
          message: error.message,
        }));
        throw badUserInput(`agentName ${errors[0]?.message ?? "is not valid"}`, errors);
      }
      if (opened.type !== "stream") {
        throw badUserInput("Too many live streams from this client", [
          { argument: "agentName", message: opened.type },
        ]);
      }
      const { stream } = opened;
      const feed = callbackIterator<LedgerEntry>(() => stream.close());
      const end = setTimeout(feed.close, stream.endsAt.getTime() - Date.now());
      end.unref();
      stream.start((entry) => feed.push(entry));
      return feed.iterator;
    },
    resolve: (entry) => entry,
  }),
);
