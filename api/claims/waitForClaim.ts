import type { Sql } from "../db/connect.ts";

const FINAL = new Set(["completed", "failed"]);

/**
 * Waits, at most `timeoutMs`, for a claim to be completed or failed (polling the database
 * every 25 ms, so it works whichever process runs the payout workers). Returns its status.
 */
export async function waitForClaim(sql: Sql, claimId: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await sql<
      { status: string }[]
    >`select status from app.claims where id = ${claimId}`;
    const status = row?.status ?? "unknown";
    if (FINAL.has(status) || Date.now() >= deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
