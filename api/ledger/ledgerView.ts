import { explorerAddress, explorerTx } from "../chain/explorerLinks.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { formatUsdcFixed } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";
import {
  LEDGER_DEFAULT_LIMIT,
  type LedgerEntryJson,
  type LedgerQuery,
  type LedgerResponse,
} from "../schemas/ledger.ts";
import { encodeLedgerCursor, type LedgerCursor } from "../schemas/ledgerCursor.ts";
import type { LedgerEntry, LedgerPage } from "./listLedgerEntries.ts";

/** A ledger entry as the public sees it (GET /api/ledger, GET /ledger): see `ledgerEntry`. */
export function ledgerEntryView(config: ServiceConfig, entry: LedgerEntry): LedgerEntryJson {
  const payoutAddress = checksummed(entry.payoutAddress);
  return {
    claim_id: entry.claimId,
    agent_name: entry.agentName,
    flow: entry.flow,
    payout_address: payoutAddress,
    amount_usdc: formatUsdcFixed(entry.amount),
    payment_tx: entry.paymentTx,
    payout_tx: entry.payoutTx,
    completed_at: entry.completedAt.toISOString(),
    payment_explorer_url: explorerTx(config, entry.paymentTx),
    payout_explorer_url: explorerTx(config, entry.payoutTx) as string,
    payout_address_explorer_url: explorerAddress(config, payoutAddress),
  };
}

/** The same page with another cursor: the filters and page size the client chose are kept. */
export function ledgerPageLink(
  path: string,
  query: LedgerQuery,
  cursor: LedgerCursor | null,
): string {
  const params = new URLSearchParams();
  if (query.limit !== LEDGER_DEFAULT_LIMIT) params.set("limit", String(query.limit));
  if (query.agent_name !== undefined) params.set("agent_name", query.agent_name);
  if (query.since) params.set("since", query.since.toISOString());
  if (query.until) params.set("until", query.until.toISOString());
  if (cursor) params.set("cursor", encodeLedgerCursor(cursor));
  const search = params.toString();
  return search ? `${path}?${search}` : path;
}

/** A ledger page as clients get it (GET /api/ledger, the ledger tool): see `ledgerResponse`. */
export function ledgerPageView(
  config: ServiceConfig,
  query: LedgerQuery,
  page: LedgerPage,
): LedgerResponse {
  return {
    entries: page.entries.map((entry) => ledgerEntryView(config, entry)),
    next_cursor: page.nextCursor ? encodeLedgerCursor(page.nextCursor) : null,
    next_url: page.nextCursor
      ? `${config.http.publicUrl}${ledgerPageLink("/api/ledger", query, page.nextCursor)}`
      : null,
    limit: query.limit,
  };
}
