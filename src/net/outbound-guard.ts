/**
 * Outbound connections to addresses that users choose (web push endpoints, per-publish
 * `webhookUrl`s) may reach only public addresses: registration and publishing need no operator,
 * and Herald then connects to the address, so an endpoint on an internal service would make
 * Herald a proxy into the operator's network (server-side request forgery).
 *
 * The rule is applied to the address actually connected to, at connect time: the guard's
 * `lookup` resolves the host name, refuses the connection when any address it resolves to is
 * not public, and hands the connection exactly the addresses it checked, so a second answer of
 * the DNS (rebinding) never reaches a socket; literal addresses are checked by `checkHost` before
 * connecting (Node does not call `lookup` for them). Public means: not in any range of
 * NON_PUBLIC_RANGES; IPv6 outside global unicast (2000::/3) is never public. An operator's own
 * private services are let through by `outbound.allowPrivateAddresses` (addresses and CIDR
 * ranges).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** Why an address is not public; also the `reason` label of the refusal metric. */
export type NonPublicReason =
  | 'unspecified' | 'loopback' | 'private' | 'cgnat' | 'link-local' | 'benchmarking' | 'documentation'
  | 'multicast' | 'broadcast' | 'reserved' | 'nat64' | '6to4' | 'site-local' | 'unique-local';

/** Every reason, for metrics exported at 0 and docs. */
export const NON_PUBLIC_REASONS: readonly NonPublicReason[] = [
  'unspecified', 'loopback', 'private', 'cgnat', 'link-local', 'benchmarking', 'documentation',
  'multicast', 'broadcast', 'reserved', 'nat64', '6to4', 'site-local', 'unique-local',
];

/** The ranges that are not public, first match wins (docs/configuration.md lists them). */
export const NON_PUBLIC_RANGES: ReadonlyArray<readonly [string, number, NonPublicReason]> = [
  ['0.0.0.0', 8, 'unspecified'], // "this network"
  ['10.0.0.0', 8, 'private'], // RFC 1918
  ['100.64.0.0', 10, 'cgnat'], // RFC 6598 shared address space
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'], // cloud metadata services live here
  ['172.16.0.0', 12, 'private'], // RFC 1918
  ['192.0.0.0', 24, 'reserved'], // IETF protocol assignments
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, '6to4'], // 6to4 relay anycast
  ['192.168.0.0', 16, 'private'], // RFC 1918
  ['198.18.0.0', 15, 'benchmarking'], // RFC 2544
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['255.255.255.255', 32, 'broadcast'],
  ['240.0.0.0', 4, 'reserved'],
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b::', 96, 'nat64'], // well-known NAT64 prefix
  ['64:ff9b:1::', 48, 'nat64'], // local-use NAT64 prefix
  ['2001:db8::', 32, 'documentation'],
  ['2001::', 23, 'reserved'], // IETF protocol assignments (Teredo, ORCHID, ...)
  ['2002::', 16, '6to4'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
];

const RANGES: ReadonlyArray<readonly [BlockList, NonPublicReason]> = NON_PUBLIC_RANGES.map(([network, prefix, reason]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, isIP(network) === 4 ? 'ipv4' : 'ipv6');
  return [list, reason] as const;
});

/** Every range at once: most addresses are public and are answered by this one check. */
const ANY_RANGE = new BlockList();
for (const [network, prefix] of NON_PUBLIC_RANGES) ANY_RANGE.addSubnet(network, prefix, isIP(network) === 4 ? 'ipv4' : 'ipv6');

const GLOBAL_UNICAST_V6 = new BlockList();
GLOBAL_UNICAST_V6.addSubnet('2000::', 3, 'ipv6');

/**
 * Why `address` (a literal IPv4 or IPv6 address, brackets allowed) is not public, or undefined
 * when it is. IPv4-mapped (::ffff:a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d) forms are
 * judged by the IPv4 address they carry. Anything that is not an address is 'reserved'.
 */
export function nonPublicReason(address: string): NonPublicReason | undefined {
  const bare = address.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const family = isIP(bare);
  if (family === 0) return 'reserved';
  if (family === 6) {
    const embedded = embeddedIpv4(bare);
    if (embedded !== undefined) return nonPublicReason(embedded);
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (!ANY_RANGE.check(bare, type)) return family === 6 && !GLOBAL_UNICAST_V6.check(bare, 'ipv6') ? 'reserved' : undefined;
  for (const [list, reason] of RANGES) {
    if (list.check(bare, type)) return reason;
  }
  if (family === 6 && !GLOBAL_UNICAST_V6.check(bare, 'ipv6')) return 'reserved';
  return undefined;
}

/** The IPv4 address of an IPv4-mapped or IPv4-translated IPv6 address, else undefined. */
function embeddedIpv4(address: string): string | undefined {
  const words = expandIpv6(address);
  if (!words) return undefined;
  const zeros = words.slice(0, 5).every((w) => w === 0);
  const mapped = zeros && words[5] === 0xffff; // ::ffff:a.b.c.d
  const translated = words.slice(0, 4).every((w) => w === 0) && words[4] === 0xffff && words[5] === 0; // ::ffff:0:a.b.c.d
  if (!mapped && !translated) return undefined;
  return `${words[6]! >> 8}.${words[6]! & 255}.${words[7]! >> 8}.${words[7]! & 255}`;
}

/** The eight 16-bit words of an IPv6 address (dotted IPv4 tail allowed), or undefined. */
function expandIpv6(address: string): number[] | undefined {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, -dotted[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  const fill = 8 - front.length - back.length;
  if (tail === undefined ? front.length !== 8 : fill < 0) return undefined;
  return [...front, ...new Array<number>(tail === undefined ? 0 : fill).fill(0), ...back];
}

/** A connection refused because its address is not public (or not allowed). */
export class OutboundAddressRefused extends Error {
  override readonly name = 'OutboundAddressRefused';
  readonly code = 'ERR_HERALD_ADDRESS_NOT_PUBLIC';

  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: NonPublicReason,
  ) {
    super(`${host === address ? `address ${address}` : `${host} resolves to ${address}, which`} is ${reason === 'unspecified' ? 'an unspecified' : `a ${reason}`} address, not a public one (allowed only in outbound.allowPrivateAddresses)`);
  }
}

/** What the guard allows beyond public addresses and whom it tells about refusals. */
export interface OutboundGuardOptions {
  /** Addresses and CIDR ranges (`10.1.0.0/16`, `fd00::/8`, `192.0.2.7`) let through though not public. */
  allowPrivateAddresses?: readonly string[];
  /** Lift the rule altogether (web push `allowPrivateEndpoints`: tests, a private push service). */
  allowAll?: boolean;
  /** Called once per refused connection. */
  onRefused?: (reason: NonPublicReason) => void;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** The check of one kind of outbound connection; its `lookup` goes into the http(s) agent's options. */
export class OutboundGuard {
  readonly #allowed = new BlockList();
  readonly #allowAll: boolean;
  readonly #onRefused: (reason: NonPublicReason) => void;

  constructor(options: OutboundGuardOptions = {}) {
    for (const entry of options.allowPrivateAddresses ?? []) addAddressOrRange(this.#allowed, entry);
    this.#allowAll = options.allowAll ?? false;
    this.#onRefused = options.onRefused ?? (() => {});
  }

  /** The refusal for connecting to `address` (a resolved or literal address), or undefined. */
  refusalFor(host: string, address: string): OutboundAddressRefused | undefined {
    if (this.#allowAll) return undefined;
    const reason = nonPublicReason(address);
    if (reason === undefined) return undefined;
    const bare = address.replace(/^\[(.*)\]$/, '$1');
    const embedded = isIP(bare) === 6 ? embeddedIpv4(bare.toLowerCase()) : undefined;
    if (this.#allowed.check(bare, isIP(bare) === 4 ? 'ipv4' : 'ipv6')) return undefined;
    if (embedded !== undefined && this.#allowed.check(embedded, 'ipv4')) return undefined;
    return new OutboundAddressRefused(host, bare, reason);
  }

  /**
   * Before connecting to a URL's host: a literal address is checked here (no lookup happens
   * for it); a name is checked by `lookup` when the connection resolves it. Throws the refusal.
   */
  checkHost(hostname: string): void {
    const bare = hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(bare) === 0) return;
    const refused = this.refusalFor(bare, bare);
    if (refused) this.#refuse(refused);
  }

  /** A dns.lookup for net/tls connect options that only ever yields allowed addresses. */
  readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      for (const { address } of addresses) {
        const refused = this.refusalFor(hostname, address);
        if (refused) {
          this.#onRefused(refused.reason);
          return callback(refused, []);
        }
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };

  #refuse(refused: OutboundAddressRefused): never {
    this.#onRefused(refused.reason);
    throw refused;
  }
}

/** Adds `10.0.0.0/8`, `fd00::/8` or a single address to `list`; throws on anything else. */
export function addAddressOrRange(list: BlockList, entry: string): void {
  const [network, prefix] = entry.split('/') as [string, string | undefined];
  const family = isIP(network);
  if (family === 0) throw new Error(`${entry} is not an IP address or CIDR range`);
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (prefix === undefined) return list.addAddress(network, type);
  const bits = Number(prefix);
  if (!/^\d+$/.test(prefix) || bits > (family === 4 ? 32 : 128)) throw new Error(`${entry} has a bad prefix length`);
  list.addSubnet(network, bits, type);
}

/** True when `entry` is an address or CIDR range `outbound.allowPrivateAddresses` accepts. */
export function isAddressOrRange(entry: string): boolean {
  try {
    addAddressOrRange(new BlockList(), entry);
    return true;
  } catch {
    return false;
  }
}
