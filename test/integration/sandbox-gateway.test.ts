/**
 * `herald sandbox-gateway` as a developer runs it: the built CLI started as a process, a Herald
 * started with the push settings it printed, devices registered through the device API with
 * tokens of each platform's format, publishes made with the Beams server SDK. A healthy token
 * is delivered (`sent` in the publish statistics, decrypted and listed by the sandbox); tokens
 * named for an error get the gateway's answer, and a dead one is removed from Herald.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, DEFAULT_PUSH, REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { registerLogFile } from '../helpers/test-logs.js';
import { until } from '../helpers/wait.js';

type Platform = 'apns' | 'fcm' | 'web';

interface Received {
  at: string;
  platform: Platform;
  token: string;
  status: number;
  answer: string;
  payload: unknown;
}

interface GatewayCounts {
  recipients: number;
  sent: number;
  failed: number;
  removed: number;
  errors: Record<string, number>;
}

let sandbox: ChildProcess;
let sandboxOut = '';
let sandboxDir: string;
let sandboxLog: ReturnType<typeof registerLogFile>;
let pageUrl: string;
let printedConfig: Record<string, unknown>;
let herald: HeraldProcess;

beforeAll(async () => {
  sandboxDir = mkdtempSync(join(tmpdir(), 'herald-sandbox-test-'));
  sandboxLog = registerLogFile('sandbox-gateway');
  sandbox = spawn(process.execPath, [CLI, 'sandbox-gateway', '--port', '0', '--dir', join(sandboxDir, 'state')], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [sandbox.stdout!, sandbox.stderr!]) {
    stream.on('data', (d: Buffer) => {
      sandboxOut += d.toString();
      sandboxLog.append(d.toString());
    });
  }
  // The settings are printed as one JSON object, its braces alone on their lines.
  const block = await until(() => (sandbox.exitCode !== null ? 'exited' : /^\{\n[\s\S]*?\n\}$/m.exec(sandboxOut)?.[0]), () => `the sandbox's push settings; it printed:\n${sandboxOut}`, 60_000);
  if (block === 'exited') throw new Error(`herald sandbox-gateway exited with ${sandbox.exitCode}:\n${sandboxOut}`);
  printedConfig = JSON.parse(block) as Record<string, unknown>;
  pageUrl = /received notifications: (http:\/\/\S+\/sandbox)/.exec(sandboxOut)![1]!;
  // The development config it wrote: the printed settings on the development push instance.
  const developmentConfig = JSON.parse(readFileSync(/HERALD_CONFIG=(\S+) npm start/.exec(sandboxOut)![1]!, 'utf8')) as { push: unknown[] };
  expect(developmentConfig.push).toEqual([{ ...DEFAULT_PUSH, ...printedConfig }]);
  // One shard: one gateway client per platform, which the first accepted send confirms.
  herald = await startHerald({ config: developmentConfig, bare: true, shards: 1 });
}, 120_000);

afterAll(async () => {
  await herald?.dispose();
  if (sandbox && sandbox.exitCode === null) {
    const exited = new Promise((resolve) => sandbox.once('exit', resolve));
    sandbox.kill('SIGTERM');
    await exited;
  }
  sandboxLog?.unregister();
  rmSync(sandboxDir, { recursive: true, force: true });
});

const devicesUrl = (): string => `${herald.baseUrl}/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/devices`;

/** Registers a device through the device API and subscribes it to `interest`; resolves with its id. */
async function register(platform: Platform, token: string, interest: string): Promise<string> {
  const body = { token, ...(platform === 'apns' ? { bundleIdentifier: 'com.example.sandbox' } : {}) };
  const created = await fetch(`${devicesUrl()}/${platform}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(created.status, await created.clone().text()).toBe(200);
  const { id } = (await created.json()) as { id: string };
  const subscribed = await fetch(`${devicesUrl()}/${platform}/${id}/interests/${interest}`, { method: 'POST' });
  expect(subscribed.status).toBe(200);
  return id;
}

/** A web push subscription made by the sandbox, as a browser's push service would: its name and the token to register. */
async function webSubscription(name: string): Promise<{ name: string; token: string }> {
  const made = await fetch(`${pageUrl}/web-subscriptions?name=${name}`, { method: 'POST' });
  expect(made.status).toBe(201);
  return (await made.json()) as { name: string; token: string };
}

/** An APNs device token (64 hex digits) that starts with `prefix`. */
function apnsToken(prefix: string): string {
  return prefix + randomBytes(32).toString('hex').slice(prefix.length);
}

/** Publishes to `interest` with the Beams server SDK and waits until the publish has finished; resolves with its statistics. */
async function publishAndWait(interest: string, title: string): Promise<Record<Platform, GatewayCounts>> {
  const { publishId } = (await beamsSdk(herald.port).publishToInterests([interest], {
    apns: { aps: { alert: { title, body: 'from the sandbox test' } } },
    fcm: { notification: { title, body: 'from the sandbox test' } },
    web: { notification: { title, body: 'from the sandbox test' } },
  })) as { publishId: string };
  const statsUrl = `${herald.baseUrl}/publish_api/v1/instances/${DEFAULT_PUSH.instanceId}/publishes/${publishId}`;
  const finished = await until(async () => {
    const stats = (await (await fetch(statsUrl, { headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` } })).json()) as { state: string; gateways: Record<Platform, GatewayCounts> };
    return stats.state === 'finished' && stats;
  }, `publish ${publishId} to finish`, 30_000);
  return finished.gateways;
}

async function receivedBySandbox(): Promise<Received[]> {
  const answer = await fetch(`${pageUrl}/received`);
  expect(answer.status).toBe(200);
  return ((await answer.json()) as { received: Received[] }).received;
}

describe('herald sandbox-gateway', () => {
  it('refuses a host that is not loopback, and lists its answers in --help', () => {
    const refused = spawnSync(process.execPath, [CLI, 'sandbox-gateway', '--host', '0.0.0.0', '--dir', join(sandboxDir, 'refused')], { encoding: 'utf8', timeout: 30_000 });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('refusing to listen on 0.0.0.0');
    const help = spawnSync(process.execPath, [CLI, 'sandbox-gateway', '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(help.status).toBe(0);
    for (const word of ['unregistered-', 'bad-', 'throttled-', '0410', '0400', '0429', '--port', '--host', '--dir']) expect(help.stdout).toContain(word);
  });

  it('prints settings Herald accepts and writes them to push-config.json', () => {
    expect(JSON.parse(readFileSync(join(sandboxDir, 'state', 'push-config.json'), 'utf8'))).toEqual(printedConfig);
    expect(Object.keys(printedConfig).sort()).toEqual(['apns', 'fcm', 'web']);
  });

  it('delivers a publish made with the Beams server SDK to APNs, FCM and web push: sent 1 each, listed and logged by the sandbox', async () => {
    const interest = `hello-${randomBytes(3).toString('hex')}`;
    const apns = apnsToken('aa');
    const fcm = `fcm-phone-${randomBytes(8).toString('hex')}`;
    const web = await webSubscription('laptop');
    await register('apns', apns, interest);
    await register('fcm', fcm, interest);
    await register('web', web.token, interest);

    const gateways = await publishAndWait(interest, 'Hello sandbox');
    for (const platform of ['apns', 'fcm', 'web'] as const) {
      expect(gateways[platform], platform).toMatchObject({ recipients: 1, sent: 1, failed: 0, removed: 0 });
    }

    const received = await receivedBySandbox();
    const apnsEntry = received.find((r) => r.token === apns)!;
    expect(apnsEntry).toMatchObject({ platform: 'apns', status: 200, answer: 'accepted', payload: { aps: { alert: { title: 'Hello sandbox' } } } });
    const fcmEntry = received.find((r) => r.token === fcm)!;
    expect(fcmEntry).toMatchObject({ platform: 'fcm', status: 200, answer: 'accepted', payload: { token: fcm, notification: { title: 'Hello sandbox' } } });
    // Web push payloads arrive encrypted: the sandbox holds the subscription's keys and shows the plaintext.
    const webEntry = received.find((r) => r.token === web.name)!;
    expect(webEntry).toMatchObject({ platform: 'web', status: 201, answer: 'accepted', payload: { notification: { title: 'Hello sandbox' } } });
    await until(() => sandboxOut.includes(`apns 200 accepted token ${apns.slice(0, 20)}`), 'the sandbox to log the APNs delivery');
    expect(sandboxOut).toMatch(/fcm {2}200 accepted token fcm-phone-/);
    expect(sandboxOut).toMatch(new RegExp(`web {2}201 accepted token ${web.name} .*Hello sandbox`));

    const page = await fetch(pageUrl);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('/sandbox/received');
  });

  it('answers unregistered-, bad- and throttled- tokens as the gateways do: Herald removes the dead devices and keeps the others', async () => {
    // Herald trusts a dead-token answer once that gateway client has accepted a send: first a healthy publish.
    const healthy = `healthy-${randomBytes(3).toString('hex')}`;
    await register('apns', apnsToken('ab'), healthy);
    await register('fcm', `fcm-healthy-${randomBytes(8).toString('hex')}`, healthy);
    await register('web', (await webSubscription('healthy')).token, healthy);
    const warmUp = await publishAndWait(healthy, 'warm-up');
    for (const platform of ['apns', 'fcm', 'web'] as const) expect(warmUp[platform].sent, platform).toBe(1);

    const interest = `errors-${randomBytes(3).toString('hex')}`;
    const tokens: Record<Platform, Record<'unregistered' | 'bad' | 'throttled', string>> = {
      apns: { unregistered: apnsToken('0410'), bad: apnsToken('0400'), throttled: apnsToken('0429') },
      fcm: { unregistered: `unregistered-${randomBytes(6).toString('hex')}`, bad: `bad-${randomBytes(6).toString('hex')}`, throttled: `throttled-${randomBytes(6).toString('hex')}` },
      web: {
        unregistered: (await webSubscription('unregistered-tab')).token,
        bad: (await webSubscription('bad-tab')).token,
        throttled: (await webSubscription('throttled-tab')).token,
      },
    };
    const ids: Record<Platform, Record<string, string>> = { apns: {}, fcm: {}, web: {} };
    for (const platform of ['apns', 'fcm', 'web'] as const) {
      for (const [kind, token] of Object.entries(tokens[platform])) ids[platform][kind] = await register(platform, token, interest);
    }

    const gateways = await publishAndWait(interest, 'errors');
    // APNs BadDeviceToken and FCM's INVALID_ARGUMENT on the token mean a dead token too; a web push 400 does not.
    expect(gateways.apns).toMatchObject({ recipients: 3, sent: 0, failed: 3, removed: 2 });
    expect(gateways.apns.errors).toMatchObject({ Unregistered: 1, BadDeviceToken: 1, TooManyRequests: 1 });
    expect(gateways.fcm).toMatchObject({ recipients: 3, sent: 0, failed: 3, removed: 2 });
    expect(gateways.fcm.errors).toMatchObject({ UNREGISTERED: 1, INVALID_ARGUMENT: 1, QUOTA_EXCEEDED: 1 });
    expect(gateways.web).toMatchObject({ recipients: 3, sent: 0, failed: 3, removed: 1 });
    expect(gateways.web.errors).toMatchObject({ 'HTTP 410': 1, 'HTTP 400': 1, 'HTTP 429': 1 });

    const status = async (platform: Platform, kind: string): Promise<number> => (await fetch(`${devicesUrl()}/${platform}/${ids[platform][kind]}`)).status;
    for (const platform of ['apns', 'fcm', 'web'] as const) {
      expect(await status(platform, 'unregistered'), `${platform} unregistered`).toBe(404);
      expect(await status(platform, 'throttled'), `${platform} throttled`).toBe(200);
    }
    expect(await status('apns', 'bad')).toBe(404);
    expect(await status('fcm', 'bad')).toBe(404);
    expect(await status('web', 'bad')).toBe(200);

    const received = await receivedBySandbox();
    const answered = (platform: Platform, token: string): string[] => received.filter((r) => r.platform === platform && r.token === token).map((r) => `${r.status} ${r.answer}`);
    expect(answered('apns', tokens.apns.unregistered)).toEqual(['410 Unregistered']);
    expect(answered('apns', tokens.apns.bad)).toEqual(['400 BadDeviceToken']);
    // Throttled: Herald retries after each Retry-After, then counts the send failed.
    expect(answered('apns', tokens.apns.throttled).length).toBeGreaterThan(1);
    expect(new Set(answered('apns', tokens.apns.throttled))).toEqual(new Set(['429 TooManyRequests']));
    expect(answered('fcm', tokens.fcm.unregistered)).toEqual(['404 UNREGISTERED']);
    expect(answered('fcm', tokens.fcm.bad)).toEqual(['400 INVALID_ARGUMENT']);
    expect(new Set(answered('fcm', tokens.fcm.throttled))).toEqual(new Set(['429 QUOTA_EXCEEDED']));
    const webName = (kind: string): string => received.find((r) => r.platform === 'web' && r.token.startsWith(`${kind}-tab-`))!.token;
    expect(answered('web', webName('unregistered'))).toEqual(['410 push subscription has unsubscribed or expired']);
    expect(answered('web', webName('bad'))).toEqual(['400 bad request']);
    expect(new Set(answered('web', webName('throttled')))).toEqual(new Set(['429 Too Many Requests']));
  }, 60_000);
});
