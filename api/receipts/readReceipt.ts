import type { Sql } from "../db/connect.ts";

/** A signed receipt as stored: exists only for a completed claim. */
export interface StoredReceipt {
  claimId: string;
  message: string;
  signature: string;
  signer: string;
  issuedAt: Date;
}

export async function readReceipt(sql: Sql, claimId: string): Promise<StoredReceipt | null> {
  const [row] = await sql<
    { claim_id: string; message: string; signature: string; signer: string; issued_at: Date }[]
  >`select claim_id, message, signature, signer, issued_at from app.receipts where claim_id = ${claimId}`;
  return row
    ? {
        claimId: row.claim_id,
        message: row.message,
        signature: row.signature,
        signer: row.signer,
        issuedAt: row.issued_at,
      }
    : null;
}
