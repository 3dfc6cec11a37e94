import { randomBytes } from "node:crypto";

/** `clm_` + 128 random bits, URL-safe (DESIGN.md asks for at least 96; CLAIM_ID_PATTERN). */
export function newClaimId(): string {
  return `clm_${randomBytes(16).toString("base64url")}`;
}
