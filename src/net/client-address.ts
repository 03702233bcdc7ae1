/**
 * The address a client connects from, as every per-address rule sees it (new-connection rate
 * limits, the binding of an HTTP fallback session, its lookup budget): the TCP peer's address,
 * or, when the peer is one of the configured `trustedProxies`, the address that proxy put in
 * `X-Forwarded-For`. The header is read from the right: the nearest address that is not a
 * trusted proxy is the client (what a client writes into the header itself sits to its left
 * and is never believed). Without `trustedProxies` the header is ignored.
 */
import { BlockList, isIP } from 'node:net';
import { addAddressOrRange } from './outbound-guard.js';

/** The client's address from the peer's address (uWS text form) and the `X-Forwarded-For` header ('' if none). */
export type ClientAddressOf = (peer: string, forwardedFor: string) => string;

/** The canonical text of an address: IPv4 dotted (also when IPv4-mapped), IPv6 compressed lower case. */
export function canonicalAddress(text: string): string {
  const trimmed = text.trim();
  const family = isIP(trimmed);
  if (family === 4) return trimmed;
  if (family !== 6) return trimmed;
  const host = new URL(`http://[${trimmed}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped) {
    const hi = parseInt(mapped[1]!, 16);
    const lo = parseInt(mapped[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return host;
}

/**
 * What a per-address budget counts under: the address itself for IPv4, its /64 for IPv6 (one
 * subscriber line holds a whole /64, so counting single IPv6 addresses would count nothing).
 */
export function addressBlock(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/** Resolves client addresses for the given trusted proxies (addresses or CIDR ranges, as the config checked them). */
export function clientAddressResolver(trustedProxies: readonly string[]): ClientAddressOf {
  if (trustedProxies.length === 0) return (peer) => canonicalAddress(peer);
  const trusted = new BlockList();
  for (const entry of trustedProxies) addAddressOrRange(trusted, entry);
  const isTrusted = (address: string): boolean => {
    const family = isIP(address);
    return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (peer, forwardedFor) => {
    let client = canonicalAddress(peer);
    if (forwardedFor === '' || !isTrusted(client)) return client;
    const hops = forwardedFor.split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = canonicalAddress(hops[i]!);
      // Not an address: nothing further left can be believed either.
      if (isIP(hop) === 0) return client;
      client = hop;
      if (!isTrusted(hop)) return hop;
    }
    return client;
  };
}
