/**
 * `herald reshard --shards N` on a real data dir: devices, interests, users, finished publishes
 * with their delivery reports and webhooks still in the outbox, written by the built server with 1 shard, are all served
 * after resharding to 3 shards and back to 1. Interruptions (SIGKILL from a test hook during the
 * copy and during the switch) lose nothing: the server refuses to start on a half-done reshard,
 * and running the command again finishes it. A running server makes the command refuse.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { CLI, DEFAULT_PUSH, HeraldProcess, REPO_ROOT } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { until } from '../helpers/wait.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
const BUNDLE = 'com.herald.reshard-test';
const DEVICES = 24;
const REPORTED_DELIVERIES = 5;
const REPORTED_OPENS = 2;

let fakes: FakeGateways;
let receiver: WebhookReceiver;
let herald: HeraldProcess | undefined;
let dataDir: string;

interface Expected {
  id: string;
  token: string;
  interests: string[];
  userId: string;
}
const expected: Expected[] = [];
const publishes: { publishId: string; recipients: number }[] = [];

function config(): Record<string, unknown> {
  return {
    push: [fakes.instanceConfig({ ...DEFAULT_PUSH, webhooks: [{ url: receiver.url('/instance'), secret: 'hook-secret' }] })],
    webhookDelivery: { batchWindowMs: 0, retryBaseMs: 500, maxAttempts: 100 },
    // The publishes' webhookUrls are on the local receiver: a private address Herald refuses unless allowed.
    outbound: { allowPrivateAddresses: ['127.0.0.1'] },
  };
}

async function start(shards: number): Promise<HeraldProcess> {
  herald = new HeraldProcess({ shards, dataDir, config: config() });
  return herald.start();
}

async function deviceApi(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${herald!.baseUrl}/device_api/v1/instances/${INSTANCE}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}


/** A delivery or open report (reporting API), as the SDKs send it. */
async function report(event: 'delivery' | 'open', publishId: string, deviceId: string): Promise<void> {
  const res = await fetch(`${herald!.baseUrl}/reporting_api/v2/instances/${INSTANCE}/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ event, publishId, deviceId, timestampSecs: Math.floor(Date.now() / 1000) }),
  });
  expect(res.status).toBe(200);
}

async function publishStats(publishId: string): Promise<{ state: string; recipients: number; delivered: number; opened: number } | undefined> {
  const res = await fetch(`${herald!.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, {
    headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` },
  });
  if (res.status !== 200) return undefined;
  return (await res.json()) as { state: string; recipients: number; delivered: number; opened: number };
}

interface ReshardRun {
  child: ChildProcess;
  /** The exit code (null when killed) and the output. */
  done: Promise<{ code: number | null; signal: string | null; output: string }>;
}

/** Starts `herald reshard`. */
function spawnReshard(shards: number, env: Record<string, string> = {}): ReshardRun {
  const child = spawn(process.execPath, [CLI, 'reshard', '--shards', String(shards), '--data-dir', dataDir], {
    cwd: REPO_ROOT,
    env: { ...process.env, HERALD_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const done = new Promise<{ code: number | null; signal: string | null; output: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, output })),
  );
  return { child, done };
}

/** Runs `herald reshard` to its end. */
function runReshard(shards: number, env: Record<string, string> = {}): Promise<{ code: number | null; signal: string | null; output: string }> {
  return spawnReshard(shards, env).done;
}

/** Everything written with 1 shard is served: devices, interests, users, publishes; new publishes reach every device. */
async function expectEverythingServed(shards: number): Promise<void> {
  const beams = beamsSdk(herald!.port);
  for (const device of expected) {
    const got = await deviceApi('GET', `/devices/apns/${device.id}`);
    expect(got.status, `device ${device.id} on ${shards} shards`).toBe(200);
    expect(((await got.json()) as { userId: string }).userId).toBe(device.userId);
    const interests = (await (await deviceApi('GET', `/devices/apns/${device.id}/interests`)).json()) as { interests: string[] };
    expect(interests.interests.sort()).toEqual([...device.interests].sort());
  }
  for (const { publishId, recipients } of publishes) {
    const stats = await publishStats(publishId);
    expect(stats, `publish ${publishId} on ${shards} shards`).toMatchObject({ state: 'finished', recipients });
  }
  // Delivery reports moved with their devices: counted as before, and a repeat is still a duplicate.
  await report('delivery', publishes[0]!.publishId, expected[0]!.id);
  expect(await publishStats(publishes[0]!.publishId)).toMatchObject({ delivered: REPORTED_DELIVERIES, opened: REPORTED_OPENS });
  // The interest and user indexes moved with their devices: new publishes reach exactly them.
  const before = fakes.apns.delivered.length;
  const { publishId } = await beams.publishToInterests(['group-1'], { apns: { aps: { alert: 'after reshard' } }, webhookUrl: receiver.url(`/after-${shards}`) });
  const group1 = expected.filter((d) => d.interests.includes('group-1'));
  const stats = await until(async () => {
    const s = await publishStats(publishId);
    return s?.state === 'finished' ? s : undefined;
  }, 'the publish to finish', 20_000);
  expect(stats.recipients).toBe(group1.length);
  const users = await beams.publishToUsers(['user-1'], { apns: { aps: { alert: 'user after reshard' } } });
  const userStats = await until(async () => {
    const s = await publishStats(users.publishId);
    return s?.state === 'finished' ? s : undefined;
  }, 'the user publish to finish', 20_000);
  expect(userStats.recipients).toBe(expected.filter((d) => d.userId === 'user-1').length);
  expect(fakes.apns.delivered.length - before).toBe(group1.length + userStats.recipients);
  publishes.push({ publishId, recipients: group1.length }, { publishId: users.publishId, recipients: userStats.recipients });
}

beforeAll(async () => {
  fakes = await startFakeGateways();
  receiver = await WebhookReceiver.start();
});

afterAll(async () => {
  await herald?.dispose();
  await receiver?.close();
  await fakes?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('herald reshard', () => {
  it('moves a 1-shard data dir to 3 shards and back, through interruptions, with nothing lost', async () => {
    herald = await new HeraldProcess({ shards: 1, config: {} }).start();
    dataDir = herald.dataDir;
    await herald.stop();
    herald = await start(1);
    const beams = beamsSdk(herald.port);

    // 1. Devices with interests and users, on one shard.
    for (let n = 0; n < DEVICES; n++) {
      const token = (n + 1).toString(16).padStart(64, 'c');
      const res = await deviceApi('POST', '/devices/apns', { token, bundleIdentifier: BUNDLE });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      const interests = ['all', `group-${n % 3}`, `device-${n}`];
      expect((await deviceApi('PUT', `/devices/apns/${id}/interests`, { interests })).status).toBe(200);
      const userId = n % 2 === 0 ? `user-${n % 4}` : '';
      if (userId) {
        const { token: jwt } = beams.generateToken(userId);
        expect((await deviceApi('PUT', `/devices/apns/${id}/user`, undefined, { authorization: `Bearer ${jwt}` })).status).toBe(200);
      }
      expected.push({ id, token, interests, userId });
    }

    // 2. Finished publishes whose webhooks (publish webhookUrl, instance webhook) stay in the outbox.
    receiver.failAll(503);
    const toInterests = await beams.publishToInterests(['all'], { apns: { aps: { alert: 'hi' } }, webhookUrl: receiver.url('/publish') });
    const toUsers = await beams.publishToUsers(['user-0', 'user-2', 'nobody'], { apns: { aps: { alert: 'hi user' } } });
    for (const { publishId } of [toInterests, toUsers]) {
      const stats = await until(async () => {
        const s = await publishStats(publishId);
        return s?.state === 'finished' ? s : undefined;
      }, 'the publish to finish', 20_000);
      publishes.push({ publishId, recipients: stats.recipients });
    }
    expect(publishes[0]!.recipients).toBe(DEVICES);
    for (const device of expected.slice(0, REPORTED_DELIVERIES)) await report('delivery', toInterests.publishId, device.id);
    for (const device of expected.slice(0, REPORTED_OPENS)) await report('open', toInterests.publishId, device.id);
    expect(await publishStats(toInterests.publishId)).toMatchObject({ delivered: REPORTED_DELIVERIES, opened: REPORTED_OPENS });
    await until(() =>
      receiver.requests.some((r) => r.path === '/publish' && r.rawBody.includes('FINISHED')) && receiver.requests.some((r) => r.path === '/instance'), 'failed webhook attempts', 20_000);
    await herald.stop();

    // 3. A start with another count says what to do.
    const refused = new HeraldProcess({ shards: 3, dataDir, config: config() });
    await expect(refused.start()).rejects.toThrow(/herald reshard --shards 3/);

    // 4. The command and a server exclude each other through the data dir's lock (herald.lock):
    // a reshard refuses while a server runs, naming its pid, and leaves nothing behind ...
    herald = await start(1);
    const serverPid = herald.child!.pid!;
    const busy = await runReshard(3);
    expect(busy.code).toBe(1);
    expect(busy.output).toContain(`is in use by another Herald process (pid ${serverPid}): stop the server first`);
    expect(existsSync(join(dataDir, 'reshard.json'))).toBe(false);
    await herald.stop();
    // ... and a server refuses to start while a reshard holds the lock (held here by a test hook).
    const holding = spawnReshard(1, { HERALD_TEST_HOOKS: '1', HERALD_RESHARD_PAUSE_AFTER_LOCK_MS: '60000' });
    const reshardPid = String(holding.child.pid);
    await until(() => {
      try {
        return readFileSync(join(dataDir, 'herald.lock'), 'utf8').trim() === reshardPid;
      } catch {
        return false;
      }
    }, 'the reshard to hold the lock', 20_000);
    await expect(new HeraldProcess({ shards: 1, dataDir, config: config() }).start()).rejects.toThrow(
      `is in use by another Herald process (pid ${reshardPid})`,
    );
    holding.child.kill('SIGKILL');
    await holding.done;

    // 5. Killed during the copy: the server refuses to start on the half-done reshard; a re-run copies again.
    const hooks = { HERALD_TEST_HOOKS: '1' };
    const copyKilled = await runReshard(3, { ...hooks, HERALD_RESHARD_EXIT_AFTER_RECORDS: '1' });
    expect(copyKilled.signal).toBe('SIGKILL');
    expect(existsSync(join(dataDir, 'reshard.json'))).toBe(true);
    await expect(new HeraldProcess({ shards: 1, dataDir, config: config() }).start()).rejects.toThrow(/unfinished reshard/);

    // 6. Killed during the switch (old shard moved out, one new one moved in): a re-run finishes it.
    const switchKilled = await runReshard(3, { ...hooks, HERALD_RESHARD_EXIT_AFTER_RENAMES: '2' });
    expect(switchKilled.signal).toBe('SIGKILL');
    expect(JSON.parse(readFileSync(join(dataDir, 'reshard.json'), 'utf8'))).toMatchObject({ phase: 'switch', to: 3 });
    const finished = await runReshard(3);
    expect(finished.code, finished.output).toBe(0);
    expect(JSON.parse(readFileSync(join(dataDir, 'herald.json'), 'utf8'))).toMatchObject({ shards: 3 });
    expect(existsSync(join(dataDir, 'reshard.json'))).toBe(false);
    expect(existsSync(join(dataDir, 'reshard-old'))).toBe(false);

    // 7. On 3 shards everything is served, and the outbox's webhooks go out once the receiver is back.
    receiver.failAll(false);
    herald = await start(3);
    await expectEverythingServed(3);
    await until(() => receiver.delivered().some((r) => r.path === '/publish' && r.rawBody.includes('FINISHED') && r.rawBody.includes(toInterests.publishId)), 'the FINISHED webhook held in the outbox', 20_000);
    await until(() => receiver.delivered().some((r) => r.path === '/instance' && r.rawBody.includes(toUsers.publishId)), 'the instance webhook held in the outbox', 20_000);
    // Both new publishes settled (their coordinator queued the closing webhooks): a reshard refuses publishes in flight.
    await until(() => receiver.delivered().some((r) => r.path === '/after-3' && r.rawBody.includes('FINISHED')), 'FINISHED', 20_000);
    await until(() => receiver.delivered().filter((r) => r.path === '/instance').length >= 2, 'the second user attempt', 20_000);
    await herald.stop();

    // 8. And back to 1 shard.
    receiver.failAll(503);
    const back = await runReshard(1);
    expect(back.code, back.output).toBe(0);
    herald = await start(1);
    await expectEverythingServed(1);
  }, 120_000);
});
