import { lookup as systemLookup } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

const GLOBAL_UNICAST_IPV6 = ipaddr.parseCIDR("2000::/3") as [ipaddr.IPv6, number];

/** How a host name becomes addresses: the system's resolver, or a test's. */
export type Resolve = (hostname: string) => Promise<{ address: string; family: number }[]>;

export const systemResolve: Resolve = (hostname) =>
  new Promise((resolve, reject) => {
    systemLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    );
  });

/** A webhook target that resolved to an address the service must not call. */
export class RefusedAddressError extends Error {
  readonly code = "ERR_WEBHOOK_ADDRESS_REFUSED";
  constructor(hostname: string, address: string, loopbackOnly = false) {
    super(
      loopbackOnly
        ? `${hostname} resolves to ${address}: plain http and ports other than 443 reach loopback only`
        : `${hostname} resolves to ${address}, which is not a public address`,
    );
    this.name = "RefusedAddressError";
  }
}

/**
 * Whether the service may open a connection to `address`: public unicast only (ipaddr.js's
 * ranges: no private, loopback, link-local, carrier-grade NAT, multicast, reserved, or IPv6
 * forms that carry an IPv4 address inside, like NAT64 and 6to4), and loopback only when
 * `allowLoopback` (the devnet's WEBHOOK_ALLOW_LOOPBACK); with `loopbackOnly`, loopback alone.
 * docs/events.md#no-ssrf
 */
export function isAllowedAddress(
  address: string,
  allowLoopback: boolean,
  loopbackOnly = false,
): boolean {
  if (!ipaddr.isValid(address)) return false;
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it is.
  const parsed = ipaddr.process(address);
  const range = parsed.range();
  if (range === "loopback") return allowLoopback;
  if (range !== "unicast" || loopbackOnly) return false;
  // ipaddr.js calls every IPv6 address it has no name for unicast, ::7f00:1 (IPv4-compatible,
  // deprecated) among them: only global unicast, 2000::/3, is public.
  return parsed.kind() === "ipv4" || (parsed as ipaddr.IPv6).match(GLOBAL_UNICAST_IPV6);
}

/**
 * Whether a URL may reach only loopback: plain http, or a port other than 443. A public
 * receiver is reached over TLS on 443 only, so a webhook can neither be read on the way nor be
 * aimed at another service of a public host (a mail server on 25, a database on 5432). The
 * devnet's receivers, on loopback, may use either.
 */
export function reachesLoopbackOnly(url: URL): boolean {
  return url.protocol !== "https:" || (url.port !== "" && url.port !== "443");
}

/**
 * A `lookup` for node:http and node:https that refuses, at connect time, a name that resolves to
 * any address not allowed: the check happens on the very answer the socket connects to, so a
 * name that answered with a public address when it was registered and answers 127.0.0.1 now
 * (DNS rebinding) is refused. Net calls it with `all: true` (autoSelectFamily) or without.
 */
export function guardedLookup(
  resolve: Resolve,
  allowLoopback: boolean,
  loopbackOnly = false,
): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refused = addresses.find(
          (entry) => !isAllowedAddress(entry.address, allowLoopback, loopbackOnly),
        );
        if (refused || addresses.length === 0) {
          callback(
            refused
              ? new RefusedAddressError(hostname, refused.address, loopbackOnly)
              : Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }),
            "",
            0,
          );
          return;
        }
        const wanted = addresses.filter(
          (entry) => !options.family || options.family === entry.family,
        );
        const usable = wanted.length > 0 ? wanted : addresses;
        if (options.all) {
          (callback as unknown as (error: null, all: typeof usable) => void)(null, usable);
        } else {
          const [first] = usable as [(typeof usable)[number]];
          callback(null, first.address, first.family);
        }
      },
      (error: Error) => callback(error as NodeJS.ErrnoException, "", 0),
    );
  };
}

const HTTPS_ONLY =
  "must be https on port 443 (plain http and other ports reach loopback only, with WEBHOOK_ALLOW_LOOPBACK)";

/**
 * Why a webhook URL is refused before any lookup, or null: when it is registered (a claim's
 * `webhook_url`, an A2A push config, an operator's endpoint) and again before each delivery. A
 * literal address must be allowed; plain http and other ports than 443 need WEBHOOK_ALLOW_LOOPBACK
 * (and then reach loopback alone: a name is checked when the socket connects).
 */
export function refusedWebhookUrl(url: URL, allowLoopback: boolean): string | null {
  const loopbackOnly = reachesLoopbackOnly(url);
  if (loopbackOnly && !allowLoopback) return HTTPS_ONLY;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(host)) return null;
  if (isAllowedAddress(host, allowLoopback, loopbackOnly)) return null;
  return isAllowedAddress(host, allowLoopback) ? HTTPS_ONLY : `${host} is not a public address`;
}
