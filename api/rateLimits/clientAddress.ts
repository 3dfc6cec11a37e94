import { isIPv6 } from "node:net";

/**
 * The address a rate limit counts a client by: IPv4 as is (also when mapped into IPv6), IPv6
 * by its /64 — one subscriber's network, which hands its hosts any address inside it — or, for
 * reads and what creates claims, by its /48: a site's allocation, which a renter gets as
 * cheaply as a /64 and holds 65,536 of them.
 */
export function clientAddress(ip: string | undefined, ipv6Prefix: 48 | 64 = 64): string {
  if (!ip) return "unknown";
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped?.[1]) return mapped[1];
  const address = ip.split("%")[0] ?? ip;
  if (!isIPv6(address)) return address;
  return `${ipv6Groups(address)
    .slice(0, ipv6Prefix / 16)
    .join(":")}::/${ipv6Prefix}`;
}

/** Who a claim is counted against (OPEN_CLAIMS_PER_CLIENT): the network claims are limited by. */
export function claimClient(ip: string | undefined): string {
  return `ip:${clientAddress(ip, 48)}`;
}

/** The eight 16-bit groups of an IPv6 address, without leading zeros. */
function ipv6Groups(address: string): string[] {
  const [head = "", tail] = address.split("::");
  const parts = (text: string) =>
    text === ""
      ? []
      : text.split(":").flatMap((part) => (part.includes(".") ? ["0", "0"] : [part]));
  const front = parts(head);
  const back = tail === undefined ? [] : parts(tail);
  const zeros = Array.from({ length: 8 - front.length - back.length }, () => "0");
  return [...front, ...zeros, ...back].map((group) => Number.parseInt(group, 16).toString(16));
}
