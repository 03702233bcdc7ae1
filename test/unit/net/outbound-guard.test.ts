import { describe, expect, it } from 'vitest';
import { hostname } from 'node:os';
import { lookup } from 'node:dns/promises';
import { OutboundAddressRefused, OutboundGuard, isAddressOrRange, nonPublicReason } from '../../../src/net/outbound-guard.js';

/** Resolves through the guard's lookup (as a connection does) with `all`. */
function guardedLookup(guard: OutboundGuard, host: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    guard.lookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });
}

describe('nonPublicReason', () => {
  it('names the range of every address that is not public', () => {
    const cases: Record<string, string> = {
      '0.0.0.0': 'unspecified', '0.1.2.3': 'unspecified', '127.0.0.1': 'loopback', '127.255.1.2': 'loopback',
      '10.1.2.3': 'private', '172.16.0.1': 'private', '172.31.255.255': 'private', '192.168.1.1': 'private',
      '100.64.0.1': 'cgnat', '100.127.255.254': 'cgnat', '169.254.169.254': 'link-local',
      '198.18.0.1': 'benchmarking', '198.19.255.255': 'benchmarking', '192.0.2.5': 'documentation', '203.0.113.9': 'documentation',
      '224.0.0.1': 'multicast', '239.255.255.250': 'multicast', '255.255.255.255': 'broadcast', '240.0.0.1': 'reserved',
      '192.0.0.8': 'reserved', '192.88.99.1': '6to4',
      '::': 'unspecified', '::1': 'loopback', '[::1]': 'loopback', 'fe80::1': 'link-local', 'fec0::1': 'site-local',
      'fc00::1': 'unique-local', 'fd12:3456::1': 'unique-local', 'ff02::1': 'multicast',
      '64:ff9b::7f00:1': 'nat64', '64:ff9b::808:808': 'nat64', '64:ff9b:1::1': 'nat64', '2002:7f00:1::1': '6to4', '2002::1': '6to4',
      '2001:db8::1': 'documentation', '2001::1': 'reserved', '100::1': 'reserved', '::7f00:1': 'reserved',
      // IPv4-mapped and IPv4-translated forms are judged by the IPv4 address they carry.
      '::ffff:127.0.0.1': 'loopback', '::ffff:7f00:1': 'loopback', '::ffff:0:7f00:1': 'loopback', '[::ffff:0:7f00:1]': 'loopback',
      '::ffff:10.0.0.1': 'private', '::ffff:0:a9fe:a9fe': 'link-local',
    };
    for (const [address, reason] of Object.entries(cases)) expect(nonPublicReason(address), address).toBe(reason);
  });

  it('passes public addresses', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '198.20.0.1', '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8']) {
      expect(nonPublicReason(address), address).toBeUndefined();
    }
  });
});

describe('OutboundGuard', () => {
  it('refuses a literal address that is not public, unless allowed, and counts each refusal', () => {
    const refusals: string[] = [];
    const guard = new OutboundGuard({ allowPrivateAddresses: ['10.1.0.0/16', 'fd00::7'], onRefused: (r) => refusals.push(r) });
    expect(() => guard.checkHost('[::ffff:0:7f00:1]')).toThrow(OutboundAddressRefused);
    expect(() => guard.checkHost('100.64.1.1')).toThrow(/100\.64\.1\.1 is a cgnat address, not a public one \(allowed only in outbound\.allowPrivateAddresses\)/);
    expect(() => guard.checkHost('10.1.200.3')).not.toThrow();
    expect(() => guard.checkHost('10.2.0.1')).toThrow(/private/);
    expect(() => guard.checkHost('[fd00::7]')).not.toThrow();
    expect(() => guard.checkHost('8.8.8.8')).not.toThrow();
    expect(() => guard.checkHost('push.example.com')).not.toThrow(); // names are checked at lookup
    expect(refusals).toEqual(['loopback', 'cgnat', 'private']);
  });

  it('refuses at lookup a host name that resolves to a loopback address', async () => {
    const refusals: string[] = [];
    const guard = new OutboundGuard({ onRefused: (r) => refusals.push(r) });
    await expect(guardedLookup(guard, 'localhost')).rejects.toThrow(/localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/);
    expect(refusals).toEqual(['loopback']);
    // Allowed: the same lookup yields the checked addresses.
    const allowed = new OutboundGuard({ allowPrivateAddresses: ['127.0.0.0/8', '::1'] });
    expect(await guardedLookup(allowed, 'localhost')).toEqual(expect.arrayContaining([expect.objectContaining({ address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) })]));
  });

  it('refuses the machine\'s own host name when it resolves to a private address', async (ctx) => {
    const addresses = await lookup(hostname(), { all: true }).catch(() => []);
    if (addresses.length === 0 || addresses.some((a) => nonPublicReason(a.address) === undefined)) {
      ctx.skip(`the host name ${hostname()} does not resolve to private addresses only here`);
    }
    await expect(guardedLookup(new OutboundGuard(), hostname())).rejects.toThrow(OutboundAddressRefused);
  });

  it('validates allowlist entries', () => {
    for (const ok of ['10.0.0.0/8', '192.0.2.7', 'fd00::/8', '::1']) expect(isAddressOrRange(ok), ok).toBe(true);
    for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0.0/x', '', 'fd00::/129']) expect(isAddressOrRange(bad), bad).toBe(false);
  });
});
