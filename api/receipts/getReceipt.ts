import type { Sql } from "../db/connect.ts";
import type { Refusal } from "../reasons/refusal.ts";
import { CLAIM_ID_PATTERN } from "../schemas/inputs.ts";
import { readReceipt, type StoredReceipt } from "./readReceipt.ts";

export type ReceiptResult =
  | { type: "receipt"; receipt: StoredReceipt }
  | Extract<Refusal, { type: "receipt_not_ready" | "claim_not_found" }>;

/**
 * A claim's receipt (GET /api/claims/{id}/receipt and every surface that shows one): the
 * receipt, or why there is none yet. A claim id that is not one in form is simply unknown.
 */
export async function getReceipt(
  deps: { sql: Sql; statusUrl: (claimId: string) => string },
  claimId: string,
): Promise<ReceiptResult> {
  if (!CLAIM_ID_PATTERN.test(claimId)) return { type: "claim_not_found", claimId };
  const [claim] = await deps.sql<{ status: string }[]>`
    select status from app.claims where id = ${claimId}`;
  if (!claim) return { type: "claim_not_found", claimId };
  const receipt = claim.status === "completed" ? await readReceipt(deps.sql, claimId) : null;
  if (!receipt) {
    return {
      type: "receipt_not_ready",
      claimStatus: claim.status,
      statusUrl: deps.statusUrl(claimId),
    };
  }
  return { type: "receipt", receipt };
}
