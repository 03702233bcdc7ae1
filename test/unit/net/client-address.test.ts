import { describe, expect, it } from 'vitest';
import { addressBlock, canonicalAddress, clientAddressResolver } from '../../../src/net/client-address.js';

describe('clientAddressResolver', () => {
  it('without trusted proxies: the peer, X-Forwarded-For ignored', () => {
    const of = clientAddressResolver([]);
    expect(of('10.0.0.5', '203.0.113.7')).toBe('10.0.0.5');
  });

  it("behind a trusted proxy: the nearest address that is not a trusted proxy, read from the right", () => {
    const of = clientAddressResolver(['10.0.0.0/8', '::1']);
    expect(of('10.0.0.5', '203.0.113.7')).toBe('203.0.113.7');
    // What the client wrote itself is left of what the proxies appended.
    expect(of('10.0.0.5', '198.51.100.1, 203.0.113.7, 10.1.2.3')).toBe('203.0.113.7');
    // Every hop trusted: the left-most.
    expect(of('10.0.0.5', '10.9.9.9, 10.1.2.3')).toBe('10.9.9.9');
    // Not an address: nothing left of it is believed.
    expect(of('10.0.0.5', '203.0.113.7, garbage')).toBe('10.0.0.5');
    expect(of('10.0.0.5', '')).toBe('10.0.0.5');
    // The peer is not a trusted proxy: its header is ignored.
    expect(of('192.0.2.1', '203.0.113.7')).toBe('192.0.2.1');
    // uWS' long IPv6 form of ::1.
    expect(of('0000:0000:0000:0000:0000:0000:0000:0001', '2001:DB8::7')).toBe('2001:db8::7');
  });

  it('canonical forms and IPv6 /64 blocks', () => {
    expect(canonicalAddress('0000:0000:0000:0000:0000:ffff:7f00:0001')).toBe('127.0.0.1');
    expect(canonicalAddress(' 203.0.113.7 ')).toBe('203.0.113.7');
    expect(addressBlock('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlock('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressBlock('2001:db8::7')).toBe('2001:db8:0:0::/64');
    expect(addressBlock('::1')).toBe('0:0:0:0::/64');
  });
});
