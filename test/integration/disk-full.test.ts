/**
 * A full disk under the built server: the data dir on a 20 MiB tmpfs (mounted here; the test
 * needs root and is skipped, saying so, where mount(8) is refused). Registrations past the
 * space answer 507 STORAGE_FULL naming the data dir, never a 500; no shard worker dies; reads,
 * deletes and a publish's clear refusal go on; /metrics shows the episode and the log has one
 * warning per shard and episode; once space is freed, writes succeed again.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceShardFor } from '../../src/shards/hash.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { until } from '../helpers/wait.js';
import { pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { DeviceApi, apnsToken, call, type ApiResponse } from './device-api-helpers.js';

const SHARDS = 2;
/** Taken by "other files" on the disk and removed to free space. */
const FILLER_BYTES = 8 * 1024 * 1024;
/** Interests per device (each about 130 bytes): ~0.15 MB of LMDB per device. */
const INTERESTS = 1000;

const mountPoint = mkdtempSync(join(tmpdir(), 'herald-diskfull-'));
let mountError = '';
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=20m', 'tmpfs', mountPoint], { stdio: 'pipe' });
} catch (err) {
  mountError = String((err as { stderr?: Buffer }).stderr ?? err).trim();
  rmSync(mountPoint, { recursive: true, force: true });
}
if (mountError) console.warn(`disk-full tests skipped: cannot mount a 20 MiB tmpfs here (needs root): ${mountError}`);

const dataDir = join(mountPoint, 'data');
const filler = join(mountPoint, 'other-files');
const APP = { id: 'full-app', key: 'full-key', secret: 'full-secret' };
let herald: HeraldProcess;
let devices: DeviceApi;
let receiver: WebhookReceiver;
let client: PusherJsClient | undefined;

/** Registers a device and gives it INTERESTS long interests: the answer that was not 200, if any. */
async function growOne(n: number): Promise<{ id?: string; refusal?: ApiResponse }> {
  const reg = await devices.register('apns', { token: apnsToken(`full-${n}`), bundleIdentifier: 'com.example.app' });
  if (reg.status !== 200) return { refusal: reg };
  const id = reg.body.id as string;
  const interests = Array.from({ length: INTERESTS }, (_, j) => `device-${n}-interest-${j}-${'x'.repeat(100)}`);
  const put = await devices.replaceInterests('apns', id, interests);
  return put.status === 200 ? { id } : { id, refusal: put };
}

async function metrics(): Promise<Map<string, number>> {
  const res = await fetch(`${herald.baseUrl}/metrics`);
  return parsePrometheus(await res.text());
}

describe.skipIf(mountError !== '')('a full data dir disk', () => {
  const stored: string[] = [];
  const refusals: ApiResponse[] = [];

  beforeAll(async () => {
    writeFileSync(filler, Buffer.alloc(FILLER_BYTES, 1));
    receiver = await WebhookReceiver.start();
    herald = await startHerald({
      shards: SHARDS,
      dataDir,
      config: { apps: [{ ...APP, webhooks: [{ url: receiver.url() }] }], push: [{ ...DEFAULT_PUSH, web: null }] },
    });
    devices = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
  });
  afterAll(async () => {
    client?.disconnect();
    await herald?.dispose();
    await receiver?.close();
    try {
      execFileSync('umount', [mountPoint], { stdio: 'pipe' });
    } finally {
      rmSync(mountPoint, { recursive: true, force: true });
    }
  });

  it('refuses writes with 507 STORAGE_FULL naming the data dir, and no shard dies', async () => {
    // Until several writes were refused (so that both shards are likely full); bounded well above what 20 MiB holds.
    for (let n = 0; n < 400 && refusals.length < 6; n++) {
      const { id, refusal } = await growOne(n);
      if (id && !refusal) stored.push(id);
      if (refusal) refusals.push(refusal);
    }
    expect(refusals.length, 'the disk never filled').toBeGreaterThan(0);
    expect(stored.length, 'nothing fitted before the disk filled').toBeGreaterThan(0);
    for (const res of refusals) {
      const detail = JSON.stringify(res.body);
      expect(res.status, detail).toBe(507);
      expect(res.body.error, detail).toBe('Insufficient Storage');
      expect(res.body.description, detail).toContain('disk');
      expect(res.body.description, detail).toContain(dataDir);
    }
    const m = await metrics();
    expect(series(m, 'herald_shard_restarts_total')).toBe(0);
    expect(series(m, 'herald_storage_full', { data_dir: dataDir })).toBeGreaterThanOrEqual(1);
    expect(series(m, 'herald_storage_writes_refused_total')).toBeGreaterThanOrEqual(refusals.length);
    expect(herald.stderr).not.toMatch(/Input\/output error|shard worker died|Internal error/);
    const warnings = herald.stderr.split('\n').filter((line) => line.includes('data dir disk full'));
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThanOrEqual(SHARDS);
    // lmdb's C library may print "Write error: … position …" with no newline when a page write
    // fails; the log line follows it on the same line.
    for (const line of warnings) expect(JSON.parse(line.slice(line.indexOf('{'))).dataDir).toBe(dataDir);
  });

  it('keeps serving reads and deletes, and refuses a publish clearly', async () => {
    for (const id of stored.slice(0, 4)) {
      const res = await devices.get('apns', id);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    // One delete on each shard.
    for (let shard = 0; shard < SHARDS; shard++) {
      const id = stored.find((d) => deviceShardFor(d, SHARDS) === shard);
      if (!id) continue;
      stored.splice(stored.indexOf(id), 1);
      const del = await devices.remove('apns', id);
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      expect((await devices.get('apns', id)).status).toBe(404);
    }
    const publish = await call(herald.baseUrl, 'POST', `/publish_api/v1/instances/${DEFAULT_PUSH.instanceId}/publishes/interests`, {
      headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` },
      body: { interests: ['device-0-interest-0'], apns: { aps: { alert: 'hi' } } },
    });
    expect(publish.status, JSON.stringify(publish.body)).toBe(507);
    expect(publish.body.description).toContain(dataDir);
    // A write to a device of a shard in its episode is still refused after the deletes.
    const m = await metrics();
    const full = [...Array(SHARDS).keys()].filter((shard) => series(m, 'herald_storage_full', { shard: String(shard) }) === 1);
    expect(full.length).toBeGreaterThan(0);
    const onFullShard = stored.find((id) => full.includes(deviceShardFor(id, SHARDS)));
    expect(onFullShard, 'a stored device on a full shard').toBeDefined();
    const again = await devices.addInterest('apns', onFullShard!, 'one-more');
    expect(again.status, JSON.stringify(again.body)).toBe(507);
    expect(herald.stderr.split('\n').filter((line) => line.includes('data dir disk full')).length).toBeLessThanOrEqual(SHARDS);
  });

  it('still delivers channel webhooks whose outbox writes find no room', async () => {
    client = pusherJsClient(herald.port, APP.key);
    const channels = ['during-full-0', 'during-full-1', 'during-full-2', 'during-full-3'];
    for (const name of channels) client.subscribe(name);
    const occupied = (): string[] => receiver.deliveredEvents().filter((e) => e.name === 'channel_occupied').map((e) => String(e.channel));
    await until(() => channels.every((c) => occupied().includes(c)), 'channel_occupied for every channel', 15_000);
    expect(series(await metrics(), 'herald_shard_restarts_total')).toBe(0);
    expect(herald.stderr).not.toMatch(/shard worker died|write failed"/);
  });

  it('accepts writes again once space is freed', async () => {
    rmSync(filler);
    // Registrations answer 507 until the space is seen; the first other answer ends the wait.
    let n = 20_000;
    const first = await until(
      async () => {
        const res = await devices.register('apns', { token: apnsToken(`after-${n++}`), bundleIdentifier: 'com.example.app' });
        return res.status !== 507 && res;
      },
      'a write accepted within 15 s of freeing space',
      15_000,
    );
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    // Every shard takes writes again (a registration lands on either).
    const shardsSeen = new Set<number>([deviceShardFor(first.body.id as string, SHARDS)]);
    let later = 0;
    await until(
      async () => {
        const res = await devices.register('apns', { token: apnsToken(`later-${later++}`), bundleIdentifier: 'com.example.app' });
        if (res.status === 200) shardsSeen.add(deviceShardFor(res.body.id as string, SHARDS));
        return shardsSeen.size === SHARDS;
      },
      () => `a write accepted on every shard (seen: ${[...shardsSeen].join(', ')})`,
      10_000,
    );
    expect(shardsSeen.size).toBe(SHARDS);
    expect(series(await metrics(), 'herald_storage_full')).toBe(0);
    for (const id of stored.slice(0, 4)) expect((await devices.get('apns', id)).status).toBe(200);
    expect(herald.stderr).not.toMatch(/shard worker died/);
  });
});
