import { claimStatus } from "./responses.ts";

/** The claim states, as the REST schema names them (SPEC.md). */
export const CLAIM_STATUSES = claimStatus.options;
export type ClaimStatus = (typeof CLAIM_STATUSES)[number];

/**
 * The states a claim rests in: no worker moves it on in the normal course, so a page stops
 * polling, a task stops following and a watching client stops. (A reorg can still move a
 * completed or failed claim: docs/operating.md#payout-reorgs.) Every surface and the CLI take
 * "final" from here.
 */
export const FINAL_CLAIM_STATUSES = [
  "completed",
  "failed",
  "expired",
] as const satisfies readonly ClaimStatus[];

export function isFinalClaimStatus(status: string): boolean {
  return (FINAL_CLAIM_STATUSES as readonly string[]).includes(status);
}
