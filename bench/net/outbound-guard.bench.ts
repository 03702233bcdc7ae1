/**
 * The address check of every outbound connection a user chose (src/net/outbound-guard.ts):
 * nonPublicReason on a public IPv4, a public IPv6 and an IPv4-mapped address (the slowest
 * path), beside node:net's BlockList.check of one range as the reference of one lookup.
 */
import { BlockList } from 'node:net';
import { nonPublicReason } from '../../src/net/outbound-guard.js';
import type { MicroSuite } from '../micro-suite.js';

export const suite: MicroSuite = {
  source: 'src/net/outbound-guard.ts',
  setup(bench) {
    const one = new BlockList();
    one.addSubnet('10.0.0.0', 8, 'ipv4');
    bench
      .add('nonPublicReason (public IPv4)', () => nonPublicReason('142.250.185.78'))
      .add('nonPublicReason (public IPv6)', () => nonPublicReason('2a00:1450:4001:82b::200a'))
      .add('nonPublicReason (IPv4-mapped loopback)', () => nonPublicReason('::ffff:0:7f00:1'))
      .add('reference: BlockList.check, one range', () => one.check('142.250.185.78', 'ipv4'));
  },
};
