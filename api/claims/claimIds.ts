import { randomBytes } from "node:crypto";

/** `clm_` + 128 random bits, URL-safe (DESIGN.md asks for at least 96). */
export function newClaimId(): string {
  return `clm_${randomBytes(16).toString("base64url")}`;
}

export const CLAIM_ID_PATTERN = /^clm_[A-Za-z0-9_-]{16,43}$/;
