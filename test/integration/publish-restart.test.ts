/**
 * A publish accepted before a kill -9 is finished after the restart: slow fake gateways keep it
 * running at the kill; after the restart every device is reached, devices sent twice are
 * bounded by the checkpoint interval and the sends in flight, and the FINISHED webhook counts
 * each device exactly once. A graceful stop (SIGTERM) in the middle sends nobody twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceShardFor } from '../../src/shards/hash.js';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
/** Sends in flight per shard and devices per checkpoint: together they bound the duplicates. */
const CONCURRENCY = 2;
const CHECKPOINT_EVERY = 2;
const SHARDS = 2;

let fakes: FakeGateways;
let hooks: WebhookReceiver;
let herald: HeraldProcess;

beforeAll(async () => {
  fakes = await startFakeGateways();
  hooks = await WebhookReceiver.start();
  herald = await startHerald({
    shards: SHARDS,
    config: {
      push: [fakes.instanceConfig({ ...DEFAULT_PUSH })],
      pushDelivery: { concurrency: CONCURRENCY, checkpointEvery: CHECKPOINT_EVERY, retryBaseDelayMs: 20 },
      webhookDelivery: { batchWindowMs: 0, retryBaseMs: 100 },
      // The publishes' webhookUrls are on the local receiver: a private address Herald refuses unless allowed.
      outbound: { allowPrivateAddresses: ['127.0.0.1'] },
    },
  });
});

afterAll(async () => {
  await herald?.dispose();
  await hooks?.close();
  await fakes?.stop();
});

async function register(platform: 'apns' | 'fcm' | 'web', token: string, interest = 'everyone'): Promise<string> {
  const base = `${herald.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/${platform}`;
  const created = await fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, ...(platform === 'apns' ? { bundleIdentifier: 'com.herald.restart' } : {}) }),
  });
  expect(created.status).toBe(200);
  const { id } = (await created.json()) as { id: string };
  const set = await fetch(`${base}/${encodeURIComponent(id)}/interests`, {
    method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ interests: [interest] }),
  });
  expect(set.status).toBe(200);
  return id;
}

function deliveredTokens(publishId: string): string[] {
  const { apns, fcm, web } = fakes.deliveredFor(publishId);
  return [...apns, ...fcm, ...web];
}

describe('publish across a kill -9', () => {
  it('finishes after the restart with every device reached and exact counts', async () => {
    const tokens: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const apns = (0xbeef00 + i).toString(16).padStart(64, '0');
      const fcm = `fcm-restart-${i}`;
      tokens.push(apns, fcm);
      ids.push(await register('apns', apns), await register('fcm', fcm));
    }
    for (let i = 0; i < 6; i++) {
      const web = fakes.web.createSubscription().token;
      tokens.push(web);
      ids.push(await register('web', web));
    }
    expect(new Set(ids.map((id) => deviceShardFor(id, SHARDS))).size).toBe(SHARDS);

    fakes.setDelay(150);
    const beams = beamsSdk(herald.port);
    const { publishId } = await beams.publishToInterests(['everyone'], {
      apns: { aps: { alert: 'restart' } },
      fcm: { notification: { title: 'restart' } },
      web: { notification: { title: 'restart' } },
      webhookUrl: `${hooks.origin}/restart`,
    });

    // Part-way through: kill the server without a chance to flush anything.
    await until(() => deliveredTokens(publishId).length >= 8, 'some deliveries', 30_000);
    await herald.kill9();
    const beforeKill = deliveredTokens(publishId).length;
    expect(beforeKill).toBeLessThan(tokens.length);

    fakes.setDelay(0);
    herald.port = 0;
    await herald.start();
    await until(() => hooks.at('/restart').some((h) => (h.json as { status: string }).status === 'FINISHED'), 'FINISHED webhook', 30_000);

    const delivered = deliveredTokens(publishId);
    expect(new Set(delivered)).toEqual(new Set(tokens));
    // Sent twice at most: per shard, what was past the last checkpoint (its interval plus the
    // sends in flight, plus the interval whose write was under way).
    expect(delivered.length - tokens.length).toBeLessThanOrEqual(SHARDS * (2 * CHECKPOINT_EVERY + CONCURRENCY));

    const finished = hooks.at('/restart').filter((h) => (h.json as { status: string }).status === 'FINISHED');
    expect(finished).toHaveLength(1);
    expect((finished[0]!.json as { results: unknown }).results).toEqual({
      apns: { recipients: 12, sent: 12, failed: 0, removed: 0 },
      fcm: { recipients: 12, sent: 12, failed: 0, removed: 0 },
      web: { recipients: 6, sent: 6, failed: 0, removed: 0 },
    });
  });

  it('resumes after a graceful stop without sending any device twice', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 16; i++) {
      const fcm = `fcm-graceful-${i}`;
      tokens.push(fcm);
      await register('fcm', fcm, 'graceful');
    }
    fakes.setDelay(150);
    const beams = beamsSdk(herald.port);
    const { publishId } = await beams.publishToInterests(['graceful'], { fcm: { notification: { title: 'graceful' } }, webhookUrl: `${hooks.origin}/graceful` });
    await until(() => deliveredTokens(publishId).length >= 4, 'some deliveries', 30_000);
    // SIGTERM: sends in flight get pushDelivery.shutdownGraceMs (1 s) to finish, far more than the fake's 150 ms.
    expect(await herald.stop()).toBe(0);
    expect(deliveredTokens(publishId).length).toBeLessThan(tokens.length);

    fakes.setDelay(0);
    herald.port = 0;
    await herald.start();
    await until(() => hooks.at('/graceful').some((h) => (h.json as { status: string }).status === 'FINISHED'), 'FINISHED webhook', 30_000);
    expect(deliveredTokens(publishId).sort()).toEqual([...tokens].sort());
    const finished = hooks.at('/graceful').find((h) => (h.json as { status: string }).status === 'FINISHED')!;
    expect((finished.json as { results: unknown }).results).toEqual({ fcm: { recipients: 16, sent: 16, failed: 0, removed: 0 } });
  });
});
