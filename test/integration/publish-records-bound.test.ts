/**
 * Publish records cannot fill the disk (single node, LMDB), against the built server:
 * - a user publish to 1,000 users of 164 bytes keeps its user ids once (the outcomes are bits),
 *   so its records cost well under the 323 kB they used to (herald_push_publish_records_bytes);
 * - `pushDelivery.retentionBytes` bounds what finished publishes keep: past it the oldest go
 *   first (their statistics answer 404), the newest keep their statistics, per-user outcome
 *   included;
 * - `pushDelivery.maxPendingBytesPerInstance` bounds an instance's queued work: with the
 *   gateways stalled, publishes past it get 429 PUBLISH_BACKLOG_FULL with `Retry-After: 1`, and
 *   are accepted again once the backlog drains.
 */
import { randomBytes } from 'node:crypto';
import type PushNotifications from '@pusher/push-notifications-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
const RETENTION_BYTES = 1_500_000;
const MAX_PENDING_BYTES = 1_000_000;
/** User ids of the maximum length (164 bytes), random (as opaque ids from an identity provider are). */
const USERS = Array.from({ length: 1000 }, (_, i) => `u${String(i).padStart(4, '0')}-${randomBytes(120).toString('base64url')}`.slice(0, 164));
/** Users with a device: the first 10. */
const WITH_DEVICES = USERS.slice(0, 10);

let fakes: FakeGateways;
let herald: HeraldProcess;
let beams: PushNotifications;

async function publishUsers(users: readonly string[]): Promise<{ status: number; retryAfter: string | null; body: { publishId?: string; error?: string; description?: string } }> {
  const response = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ users, fcm: { notification: { title: 'bounded' } } }),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { publishId?: string } };
}

async function stats(publishId: string): Promise<{ status: number; body: { state?: string; users?: { deliveredToGateway: string[]; noDevices: string[]; gatewayFailed: string[] } } }> {
  const response = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, {
    headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` },
  });
  return { status: response.status, body: (await response.json()) as { state?: string } };
}

async function finished(publishId: string): Promise<void> {
  await until(async () => (await stats(publishId)).body.state === 'finished', `publish ${publishId} finished`, 30_000);
}

async function recordBytes(): Promise<number> {
  const text = await (await fetch(`${herald.baseUrl}/metrics`)).text();
  const metrics = parsePrometheus(text);
  expect([...metrics.keys()].some((k) => k.startsWith('herald_push_publish_records_bytes')), 'herald_push_publish_records_bytes in /metrics').toBe(true);
  return series(metrics, 'herald_push_publish_records_bytes');
}

beforeAll(async () => {
  fakes = await startFakeGateways();
  herald = await startHerald({
    shards: 2,
    config: {
      push: [fakes.instanceConfig({ ...DEFAULT_PUSH })],
      pushDelivery: { retentionBytes: RETENTION_BYTES, maxPendingBytesPerInstance: MAX_PENDING_BYTES, retryAttempts: 1 },
    },
  });
  beams = beamsSdk(herald.port);
  for (const [i, user] of WITH_DEVICES.entries()) {
    const base = `${herald.baseUrl}/device_api/v1/instances/${INSTANCE}`;
    const registered = await fetch(`${base}/devices/fcm`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: `fcm-bounded-${i}` }) });
    expect(registered.status).toBe(200);
    const { id } = (await registered.json()) as { id: string };
    const { token } = beams.generateToken(user);
    const associated = await fetch(`${base}/devices/fcm/${encodeURIComponent(id)}/user`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } });
    expect(associated.status).toBe(200);
  }
}, 60_000);

afterAll(async () => {
  await herald?.dispose();
  await fakes?.stop();
});

describe('publish records stay bounded', () => {
  let first: string;
  let perPublish: number;

  it('keeps a 1,000-user publish in well under the 323 kB it used to take, user ids once', async () => {
    const result = await publishUsers(USERS);
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    first = result.body.publishId!;
    await finished(first);
    await until(async () => (await recordBytes()) > 0, 'the finished publish counted in herald_push_publish_records_bytes', 30_000);
    perPublish = await recordBytes();
    // The ids alone are 164 kB; stored once and deflated, the whole record is less.
    console.log(`records of one 1,000-user publish (164-byte ids): ${perPublish} bytes`);
    expect(perPublish).toBeLessThan(170_000);
    const { body } = await stats(first);
    expect(body.users!.deliveredToGateway).toEqual([...WITH_DEVICES].sort());
    expect(body.users!.noDevices).toHaveLength(USERS.length - WITH_DEVICES.length);
    expect(body.users!.gatewayFailed).toEqual([]);
  }, 60_000);

  it('drops the oldest finished publishes past retentionBytes, keeping the newest with their statistics', async () => {
    const ids = [first];
    // Each shard keeps its share of retentionBytes and a publish's records live on one shard
    // (by its id): twice the total per shard, so the first one's shard surely passes its share.
    const count = Math.ceil((4 * RETENTION_BYTES) / perPublish) + 1;
    for (let i = 0; i < count; i++) {
      const result = await publishUsers(USERS);
      expect(result.status, JSON.stringify(result.body)).toBe(200);
      ids.push(result.body.publishId!);
      await finished(result.body.publishId!);
    }
    // The sum can be under the bound while one shard is still over its share: wait for the drop.
    await until(async () => (await stats(first)).status === 404, 'the oldest publish dropped', 30_000);
    await until(async () => (await recordBytes()) <= RETENTION_BYTES, 'herald_push_publish_records_bytes back under retentionBytes', 30_000);
    const newest = await stats(ids.at(-1)!);
    expect(newest.status).toBe(200);
    expect(newest.body.users!.deliveredToGateway).toEqual([...WITH_DEVICES].sort());
  }, 180_000);

  it('refuses publishes past maxPendingBytesPerInstance with 429 PUBLISH_BACKLOG_FULL and Retry-After: 1, and accepts again once drained', async () => {
    // Stalled gateways: every publish to users with devices stays pending.
    fakes.setDelay(60_000);
    const accepted: string[] = [];
    let refused: Awaited<ReturnType<typeof publishUsers>> | undefined;
    for (let i = 0; i < 40 && !refused; i++) {
      const result = await publishUsers(USERS);
      if (result.status === 200) accepted.push(result.body.publishId!);
      else refused = result;
    }
    expect(refused, 'a publish refused once the backlog is full').toBeDefined();
    expect(refused!.status).toBe(429);
    expect(refused!.retryAfter).toBe('1');
    expect(refused!.body.error).toBe('Too Many Requests');
    expect(refused!.body.description).toMatch(/maxPendingBytesPerInstance/);
    // The bound is on bytes: about MAX_PENDING_BYTES of these publishes were accepted first.
    expect(accepted.length).toBeGreaterThanOrEqual(Math.floor(MAX_PENDING_BYTES / 200_000));
    fakes.setDelay(0);
    for (const id of accepted) await finished(id);
    const again = await publishUsers(USERS);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    await finished(again.body.publishId!);
  }, 240_000);
});
