import { getAddress } from "viem";
import type { ServiceConfig } from "../config.ts";
import { formatUsdcFixed } from "../money.ts";
import type { LedgerEntryJson } from "../schemas/ledger.ts";
import type { LedgerEntry } from "./listLedgerEntries.ts";

/** A ledger entry as the public sees it (GET /api/ledger, GET /ledger): see `ledgerEntry`. */
export function ledgerEntryView(config: ServiceConfig, entry: LedgerEntry): LedgerEntryJson {
  const explorer = config.chain.explorerUrl;
  const payoutAddress = getAddress(entry.payoutAddress);
  return {
    claim_id: entry.claimId,
    agent_name: entry.agentName,
    flow: entry.flow,
    payout_address: payoutAddress,
    amount_usdc: formatUsdcFixed(entry.amount),
    payment_tx: entry.paymentTx,
    payout_tx: entry.payoutTx,
    completed_at: entry.completedAt.toISOString(),
    payment_explorer_url: entry.paymentTx ? `${explorer}/tx/${entry.paymentTx}` : null,
    payout_explorer_url: `${explorer}/tx/${entry.payoutTx}`,
    payout_address_explorer_url: `${explorer}/address/${payoutAddress}`,
  };
}
