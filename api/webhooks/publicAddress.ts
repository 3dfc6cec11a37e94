import { lookup as systemLookup } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

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
  constructor(hostname: string, address: string) {
    super(`${hostname} resolves to ${address}, which is not a public address`);
    this.name = "RefusedAddressError";
  }
}

/**
 * Whether the service may open a connection to `address`: public unicast only (ipaddr.js's
 * ranges: no private, loopback, link-local, carrier-grade NAT, multicast, reserved, or IPv6
 * forms that carry an IPv4 address inside, like NAT64 and 6to4), and loopback only when
 * `allowLoopback` (the devnet's WEBHOOK_ALLOW_LOOPBACK). docs/events.md#no-ssrf
 */
export function isAllowedAddress(address: string, allowLoopback: boolean): boolean {
  if (!ipaddr.isValid(address)) return false;
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it is.
  const range = ipaddr.process(address).range();
  return range === "unicast" || (allowLoopback && range === "loopback");
}

/**
 * A `lookup` for node:http and node:https that refuses, at connect time, a name that resolves to
 * any address not allowed: the check happens on the very answer the socket connects to, so a
 * name that answered with a public address when it was registered and answers 127.0.0.1 now
 * (DNS rebinding) is refused. Net calls it with `all: true` (autoSelectFamily) or without.
 */
export function guardedLookup(resolve: Resolve, allowLoopback: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refused = addresses.find((entry) => !isAllowedAddress(entry.address, allowLoopback));
        if (refused || addresses.length === 0) {
          callback(
            refused
              ? new RefusedAddressError(hostname, refused.address)
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

/**
 * A URL literal's address is connected to without any lookup: checked here instead. Null when
 * the host is a name (the lookup checks it) or an allowed address; else why not.
 */
export function refusedLiteralHost(url: URL, allowLoopback: boolean): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(host)) return null;
  return isAllowedAddress(host, allowLoopback) ? null : `${host} is not a public address`;
}
