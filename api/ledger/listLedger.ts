import type { Sql } from "../db/connect.ts";
import { type InvalidRequest, invalidRequest } from "../reasons/refusal.ts";
import { type LedgerQuery, ledgerQuery } from "../schemas/ledger.ts";
import { parseInput } from "../schemas/parseInput.ts";
import type { CachedFirstPages } from "./cachedFirstPages.ts";
import { type LedgerPage, listLedgerEntries } from "./listLedgerEntries.ts";

export type LedgerResult = { type: "page"; query: LedgerQuery; page: LedgerPage } | InvalidRequest;

/**
 * One page of the public ledger for a query as a client gives it (GET /api/ledger's query
 * string, the page's form, a tool's arguments): checked by `ledgerQuery`, then read; the
 * unfiltered first page from `firstPages` when given.
 */
export async function listLedger(
  sql: Sql,
  query: unknown,
  firstPages?: CachedFirstPages,
): Promise<LedgerResult> {
  const input = parseInput(ledgerQuery, query);
  if (!input.ok) return invalidRequest(input.errors);
  const { limit, cursor, agent_name, since, until } = input.value;
  const unfiltered =
    cursor === undefined && agent_name === undefined && since === undefined && until === undefined;
  const page =
    firstPages && unfiltered
      ? await firstPages.read(limit)
      : await listLedgerEntries(sql, { limit, after: cursor, agentName: agent_name, since, until });
  return { type: "page", query: input.value, page };
}
