import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../../src/config/load.js';

/** The defaults of cluster.postgresTimeouts (ms). */
const POSTGRES_TIMEOUTS = { connectMs: 2000, statementMs: 3000, queryMs: 4000, idleInTransactionMs: 10_000 };

describe('config: cluster', () => {
  it('is absent by default: a single node without Redis', () => {
    expect(parseConfig({}).cluster).toBeUndefined();
  });

  it('takes redisUrl, with keyPrefix and nodeTimeoutMs defaults', () => {
    expect(parseConfig({ cluster: { redisUrl: 'rediss://:pw@redis.internal:6380/2' } }).cluster).toEqual({
      redisUrl: 'rediss://:pw@redis.internal:6380/2',
      keyPrefix: 'herald:',
      nodeTimeoutMs: 10_000,
      publishPartitions: 16,
      publishLeaseMs: 15_000,
      postgresTimeouts: POSTGRES_TIMEOUTS,
      subscriptionWaitMs: 10_000,
    });
  });

  it('rejects a URL that is not redis:// or rediss://, and unknown fields', () => {
    expect(() => parseConfig({ cluster: { redisUrl: 'http://x' } })).toThrow(/cluster\.redisUrl/);
    expect(() => parseConfig({ cluster: { redisUrl: 'redis://x', nodes: 3 } })).toThrow(ConfigError);
    expect(() => parseConfig({ cluster: { redisUrl: 'redis://x', nodeTimeoutMs: 10 } })).toThrow(/cluster\.nodeTimeoutMs/);
  });

  it('HERALD_REDIS_SENTINELS, _MASTER and _PASSWORD each replace their own field of cluster.sentinel', () => {
    const env = { HERALD_REDIS_URL: 'redis://:pw@mymaster', HERALD_REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2:26379', HERALD_REDIS_SENTINEL_MASTER: 'mymaster' };
    expect(loadConfig({ env }).cluster?.sentinel).toEqual({ masterName: 'mymaster', addresses: ['10.0.0.1:26379', '10.0.0.2:26379'], tls: false });
    const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'config.json');
    const sentinel = { masterName: 'file-master', addresses: ['file:26379'], tls: true };
    writeFileSync(path, JSON.stringify({ cluster: { redisUrl: 'redis://file:6379', keyPrefix: 'blue:', sentinel } }));
    expect(loadConfig({ configPath: path, env: { HERALD_REDIS_SENTINEL_PASSWORD: 'env-secret' } }).cluster).toEqual({
      redisUrl: 'redis://file:6379',
      keyPrefix: 'blue:',
      nodeTimeoutMs: 10_000,
      publishPartitions: 16,
      publishLeaseMs: 15_000,
      postgresTimeouts: POSTGRES_TIMEOUTS,
      subscriptionWaitMs: 10_000,
      sentinel: { ...sentinel, password: 'env-secret' },
    });
    expect(() => loadConfig({ env: { HERALD_REDIS_SENTINELS: 'h:1' } })).toThrow(/cluster\.(redisUrl|sentinel\.masterName)/);
  });

  it('HERALD_REDIS_URL turns the cluster on, or replaces only the file URL', () => {
    expect(loadConfig({ env: { HERALD_REDIS_URL: 'redis://127.0.0.1:7000' } }).cluster).toEqual({
      redisUrl: 'redis://127.0.0.1:7000',
      keyPrefix: 'herald:',
      nodeTimeoutMs: 10_000,
      publishPartitions: 16,
      publishLeaseMs: 15_000,
      postgresTimeouts: POSTGRES_TIMEOUTS,
      subscriptionWaitMs: 10_000,
    });
    const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'config.json');
    writeFileSync(path, JSON.stringify({ cluster: { redisUrl: 'redis://file:6379', keyPrefix: 'blue:', nodeTimeoutMs: 5000 } }));
    expect(loadConfig({ configPath: path, env: { HERALD_REDIS_URL: 'redis://env:6379' } }).cluster).toEqual({
      redisUrl: 'redis://env:6379',
      keyPrefix: 'blue:',
      nodeTimeoutMs: 5000,
      publishPartitions: 16,
      publishLeaseMs: 15_000,
      postgresTimeouts: POSTGRES_TIMEOUTS,
      subscriptionWaitMs: 10_000,
    });
  });

  it('bounds PostgreSQL calls: postgresTimeouts overrides one field at a time, queryMs above statementMs', () => {
    const cluster = (postgresTimeouts: unknown) => ({ cluster: { redisUrl: 'redis://r:6379', postgresUrl: 'postgres://p/db', postgresTimeouts } });
    expect(parseConfig(cluster({ connectMs: 500 })).cluster?.postgresTimeouts).toEqual({ ...POSTGRES_TIMEOUTS, connectMs: 500 });
    expect(() => parseConfig(cluster({ statementMs: 5000 }))).toThrow(ConfigError);
    expect(() => parseConfig(cluster({ statementMs: 5000 }))).toThrow(/cluster\.postgresTimeouts\.queryMs.*greater than statementMs/);
    expect(() => parseConfig(cluster({ queryMs: 50 }))).toThrow(/cluster\.postgresTimeouts\.queryMs/);
  });
});
