/** The Redis connections from the cluster config: passwords, TLS (rediss://), backoff, fail-fast. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedisConnections,
  reconnectDelayMs,
  RECONNECT_MAX_MS,
  redactUrl,
  RedisUnavailableError,
  whenAvailable,
} from '../../../../../src/channels/adapter/redis/connection.js';
import { freePort, RedisServer } from '../../../../helpers/redis-server.js';

const FIXTURES = join(import.meta.dirname, '../../../../fixtures');
let secured: RedisServer;
let tls: RedisServer;
let tlsPort = 0;

beforeAll(async () => {
  secured = await new RedisServer({ args: ['--requirepass', 's3cret/pass'] }).start();
  tlsPort = await freePort();
  tls = await new RedisServer({
    args: [
      '--tls-port', String(tlsPort),
      '--tls-cert-file', join(FIXTURES, 'server.pem'),
      '--tls-key-file', join(FIXTURES, 'server-key.pem'),
      '--tls-ca-cert-file', join(FIXTURES, 'ca.pem'),
      '--tls-auth-clients', 'no',
    ],
  }).start();
});

afterAll(async () => {
  await Promise.allSettled([secured.stop(), tls.stop()]);
});

describe('createRedisConnections', () => {
  it('authenticates with the password in the URL (percent-encoded)', async () => {
    const conns = createRedisConnections({ redisUrl: `redis://:${encodeURIComponent('s3cret/pass')}@127.0.0.1:${secured.port}/0` }, { nodeId: 'n1' });
    await conns.ready();
    expect(await conns.commands.ping()).toBe('PONG');
    expect(await conns.commands.client('GETNAME')).toBe('herald-n1');
    await conns.close();
  });

  it('does not become ready with a wrong password, and never shows the password in its error', async () => {
    const conns = createRedisConnections({ redisUrl: `redis://:wrong-pass@127.0.0.1:${secured.port}` }, { nodeId: 'n2' });
    const err = await conns.ready(1500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisUnavailableError);
    expect(String((err as Error).message)).not.toContain('wrong-pass');
    await conns.close();
  });

  it('connects over TLS with rediss:// (private CA given as tls options)', async () => {
    const conns = createRedisConnections(
      { redisUrl: `rediss://127.0.0.1:${tlsPort}` },
      { nodeId: 'n3', tls: { ca: readFileSync(join(FIXTURES, 'ca.pem')) } },
    );
    await conns.ready();
    expect(await conns.commands.ping()).toBe('PONG');
    await conns.close();
  });

  it('fails commands at once while Redis is away instead of queueing them', async () => {
    const port = await freePort();
    const conns = createRedisConnections({ redisUrl: `redis://127.0.0.1:${port}` }, { nodeId: 'n4' });
    await expect(whenAvailable(() => conns.commands.get('x'))).rejects.toBeInstanceOf(RedisUnavailableError);
    await conns.close();
  });
});

describe('helpers', () => {
  it('backs off exponentially with jitter, capped', () => {
    expect(reconnectDelayMs(1, () => 0.5)).toBe(50);
    expect(reconnectDelayMs(2, () => 0.5)).toBe(100);
    expect(reconnectDelayMs(30, () => 0.5)).toBe(RECONNECT_MAX_MS);
    expect(reconnectDelayMs(30, () => 0.999)).toBeLessThanOrEqual(RECONNECT_MAX_MS * 1.5);
  });

  it('redacts passwords in URLs', () => {
    expect(redactUrl('redis://:secret@h:6379/0')).toBe('redis://:***@h:6379/0');
    expect(redactUrl('rediss://user:secret@h')).toBe('rediss://user:***@h');
    expect(redactUrl('redis://h:6379')).toBe('redis://h:6379');
  });
});
