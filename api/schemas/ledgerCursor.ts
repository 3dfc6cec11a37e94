import { CLAIM_ID_PATTERN } from "./inputs.ts";

/**
 * Where a ledger page ends: the last entry's completion time and claim id. The ledger is
 * ordered by (completed_at desc, id desc), so "after this cursor" is a keyset condition that
 * new completions (always newer) cannot shift: no duplicates or gaps between pages.
 *
 * The time is PostgreSQL's own microsecond text, not a JS Date (milliseconds only): rounding
 * it would skip or repeat claims completed within the same millisecond.
 */
export interface LedgerCursor {
  /** `2025-01-31T12:00:00.123456Z`, exactly as stored. */
  completedAt: string;
  claimId: string;
}

const EXACT_UTC_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Opaque to clients: base64url of a JSON pair. */
export function encodeLedgerCursor(cursor: LedgerCursor): string {
  return Buffer.from(JSON.stringify([cursor.completedAt, cursor.claimId])).toString("base64url");
}

/** The cursor, or null when the text is not one this service issued. */
export function decodeLedgerCursor(text: string): LedgerCursor | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) return null;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length !== 2) return null;
  const [completedAt, claimId] = value as unknown[];
  if (typeof completedAt !== "string" || typeof claimId !== "string") return null;
  if (!EXACT_UTC_TIME.test(completedAt) || Number.isNaN(Date.parse(completedAt))) return null;
  if (!CLAIM_ID_PATTERN.test(claimId)) return null;
  return { completedAt, claimId };
}
