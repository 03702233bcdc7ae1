/**
 * `cluster.sentinel`: connections that find the master through a sentinel (with the sentinel's
 * own password), never show a password in what they log, and treat a write refused by a
 * replica (READONLY: a demoted master) as Redis being away.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedisConnections,
  describeRedis,
  parseHostPort,
  RedisUnavailableError,
  whenAvailable,
} from '../../../src/cluster/connection.js';
import { parseConfig } from '../../../src/config/load.js';
import { MASTER_NAME, RedisSentinelSet } from '../../helpers/redis-sentinel.js';

const SENTINEL_PASSWORD = 'sentinel-s3cret';
let set: RedisSentinelSet;

beforeAll(async () => {
  set = await new RedisSentinelSet({ sentinelPassword: SENTINEL_PASSWORD }).start();
}, 30_000);
afterAll(async () => {
  await set?.stop();
});

describe('config: cluster.sentinel', () => {
  it('takes masterName and addresses, tls off by default', () => {
    const cluster = parseConfig({ cluster: { redisUrl: 'redis://:pw@mymaster/0', sentinel: { masterName: 'mymaster', addresses: ['10.0.0.1:26379', '[::1]:26380'] } } }).cluster;
    expect(cluster?.sentinel).toEqual({ masterName: 'mymaster', addresses: ['10.0.0.1:26379', '[::1]:26380'], tls: false });
  });

  it('rejects an address without a port, an empty list, a missing masterName and unknown fields', () => {
    const withSentinel = (sentinel: unknown) => () => parseConfig({ cluster: { redisUrl: 'redis://x', sentinel } });
    expect(withSentinel({ masterName: 'm', addresses: ['10.0.0.1'] })).toThrow(/cluster\.sentinel\.addresses/);
    expect(withSentinel({ masterName: 'm', addresses: [] })).toThrow(/cluster\.sentinel\.addresses/);
    expect(withSentinel({ addresses: ['h:1'] })).toThrow(/cluster\.sentinel\.masterName/);
    expect(withSentinel({ masterName: 'm', addresses: ['h:1'], quorum: 2 })).toThrow(/cluster\.sentinel/);
  });
});

describe('connections through a sentinel', () => {
  it('find the master through the sentinel (with its password), never dialling the URL host', async () => {
    const connections = createRedisConnections(
      { redisUrl: 'redis://127.0.0.1:1', sentinel: { masterName: MASTER_NAME, addresses: [set.sentinelAddress], password: SENTINEL_PASSWORD, tls: false } },
      { nodeId: 'sentinel-unit' },
    );
    try {
      await connections.ready(10_000);
      await connections.commands.set('sentinel-unit:k', 'v');
      const master = await set.masterClient();
      expect(await master.get('sentinel-unit:k')).toBe('v');
      master.disconnect();
    } finally {
      await connections.close();
    }
  });

  it('do not become ready with a wrong sentinel password, and say where without the password', async () => {
    const cluster = { redisUrl: 'redis://:master-pw@127.0.0.1:1', sentinel: { masterName: MASTER_NAME, addresses: [set.sentinelAddress], password: 'wrong-password', tls: false } };
    const connections = createRedisConnections(cluster, { nodeId: 'sentinel-unit-bad' });
    try {
      const err = await connections.ready(1_500).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisUnavailableError);
      expect(String(err)).toContain(`master ${MASTER_NAME} via sentinels ${set.sentinelAddress}`);
      expect(String(err)).not.toMatch(/wrong-password|master-pw/);
    } finally {
      await connections.close();
    }
    expect(describeRedis(cluster)).not.toMatch(/wrong-password|master-pw/);
  });

  it('treat a write refused by a replica (READONLY) as Redis being away', async () => {
    const connections = createRedisConnections({ redisUrl: `redis://127.0.0.1:${set.replica!.port}` }, { nodeId: 'sentinel-unit-replica' });
    try {
      await connections.ready(5_000);
      await expect(whenAvailable(() => connections.commands.set('k', 'v'))).rejects.toBeInstanceOf(RedisUnavailableError);
    } finally {
      await connections.close();
    }
  });

  it('parses host:port, IPv6 in brackets', () => {
    expect(parseHostPort('10.0.0.1:26379')).toEqual({ host: '10.0.0.1', port: 26379 });
    expect(parseHostPort('[::1]:26380')).toEqual({ host: '::1', port: 26380 });
    expect(parseHostPort('sentinel-1.internal:5000')).toEqual({ host: 'sentinel-1.internal', port: 5000 });
  });
});
