/** The Redis connections from the cluster config: passwords, TLS (rediss://), backoff, fail-fast. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedisConnections,
  reconnectDelayMs,
  RECONNECT_MAX_MS,
  redactUrl,
  replyTimeoutMs,
  RedisUnavailableError,
  whenAvailable,
} from '../../../src/cluster/connection.js';
import { freePort, RedisServer } from '../../helpers/redis-server.js';
import { sleep, until } from '../../helpers/wait.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
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

describe('a Redis that stops answering (watchReplies)', () => {
  it('keeps a connection whose Redis answers late within replyTimeoutMs, drops and reconnects one silent past it', async () => {
    const redis = await new RedisServer().start();
    const connections = createRedisConnections({ redisUrl: redis.url }, { nodeId: 'watchdog', replyTimeoutMs: 2000 });
    try {
      await connections.ready();
      let closes = 0;
      connections.commands.on('close', () => closes++);
      connections.subscriber.on('close', () => closes++);
      // Silent for 1 s: a slow answer, not a dead connection.
      redis.pause();
      // time: a second of silence is what is tested.
      await sleep(1000);
      redis.resume();
      expect(await connections.commands.ping()).toBe('PONG');
      expect(closes).toBe(0);
      // Silent past 2 s: both connections are dropped, a command waiting on them fails as in an outage.
      redis.pause();
      const waiting = whenAvailable(() => connections.commands.get('k'));
      await expect(waiting).rejects.toBeInstanceOf(RedisUnavailableError);
      await until(() => closes >= 2, 'both connections dropped', 5000);
      redis.resume();
      await connections.ready(10_000);
      expect(await connections.commands.ping()).toBe('PONG');
    } finally {
      redis.resume();
      await connections.close();
      await redis.stop();
    }
  }, 30_000);

  it('connects again when ioredis gives a connection up (end) other than by close()', async () => {
    const redis = await new RedisServer().start();
    const connections = createRedisConnections({ redisUrl: redis.url }, { nodeId: 'keep' });
    try {
      await connections.ready();
      // What a failed connect attempt does inside ioredis (with sentinels: the failover detector
      // dropping a connection that is already reconnecting): status 'end', no reconnect of its own.
      connections.commands.disconnect();
      connections.subscriber.disconnect();
      await until(() => connections.commands.status === 'end', 'the connection given up', 2000);
      await connections.ready(5000);
      expect(await connections.commands.ping()).toBe('PONG');
    } finally {
      await connections.close();
      await redis.stop();
    }
    // Closed on purpose: it stays closed.
    // time: a closed connection that would reconnect does so within its first retry delay.
    await sleep(300);
    expect(connections.commands.status).toBe('end');
  }, 20_000);

  it('derives the timeout from nodeTimeoutMs: half of it, within 2 to 5 s', () => {
    expect(replyTimeoutMs(10_000)).toBe(5000);
    expect(replyTimeoutMs(6_000)).toBe(3000);
    expect(replyTimeoutMs(2_000)).toBe(2000);
    expect(replyTimeoutMs(600_000)).toBe(5000);
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
