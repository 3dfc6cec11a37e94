import { getDomain } from "tldts";

/**
 * The organizational domain (RFC 7489 section 3.2) by the Public Suffix List: what the sender
 * checks align on, and what a reply budget per domain counts by.
 */
export function organizationalDomain(domain: string): string | null {
  return getDomain(domain.toLowerCase().replace(/\.$/, ""), { allowPrivateDomains: true });
}
