/**
 * `npm run bench:tenants [-- --apps N] [--api-apps N] [--scale-apps N] [--only a,b] [--cli path]`:
 * Herald with many apps.
 * 1. Start-up: the built server (1 shard) started with 1 app and with N apps in its config
 *    file: ms until it listens, and resident anonymous memory (RssAnon) 3 s and 20 s after (the
 *    difference at 20 s divided by N is the memory per app); then a SIGHUP with one app's
 *    secret changed: ms until that secret is accepted.
 * 2. Per-request and per-connection lookup (in this process, tinybench): the C1 trigger handler
 *    (signature check included) and the WebSocket handshake parse for an app among 1 and among
 *    N apps; the ratio says whether the lookup grows with the app count.
 * 3. Admin API: `--api-apps` apps created through `POST /admin/v1/apps` (16 at a time), then
 *    one app's `PATCH` timed with 10 apps and with all of them (one change must not rebuild the
 *    others), then the node restarted: start-up with those apps read from its LMDB.
 * 4. Scale (`--only scale`): `--scale-apps` apps created through the admin API in batches of
 *    1,000 (16 at a time): ms per batch and the ratio last / first (a create must not cost more
 *    with more apps); then `GET /admin/v1/overview` as the dashboard polls it (ms and bytes per
 *    answer); then trigger latency (C1, 8 in flight, one app) without and with an overview
 *    poller every 3 s, as one open dashboard tab. `--cli` runs another build (an older one, for
 *    a before / after figure on the same machine).
 * Sections: `--only startup,lookup,api,scale` (default: all). Figures only, each beside its reference measured in the same run; never pass/fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Bench } from 'tinybench';
import { readMemoryKb } from './proc-stats.js';
import type { ChannelAdapter } from '../src/channels/adapter/channel-adapter.js';
import { triggerEvent } from '../src/channels/http-api/events.js';
import { MessageQuota } from '../src/channels/quota.js';
import { signedHandler } from '../src/channels/http-api/routes.js';
import { parseHandshake } from '../src/channels/ws/handshake.js';
import { appSchema, type AppConfig } from '../src/config/schema.js';
import type { RequestContext } from '../src/http/uws-http.js';

const { values } = parseArgs({
  options: {
    apps: { type: 'string', default: '10000' },
    'api-apps': { type: 'string', default: '10000' },
    'scale-apps': { type: 'string', default: '20000' },
    only: { type: 'string', default: 'startup,lookup,api,scale' },
    cli: { type: 'string' },
  },
});
const APPS = Number(values.apps);
const API_APPS = Number(values['api-apps']);
const SCALE_APPS = Number(values['scale-apps']);
const SECTIONS = new Set(values.only.split(','));
const CLI = values.cli ? resolve(values.cli) : resolve(fileURLToPath(new URL('.', import.meta.url)), '../src/cli.js');
const TOKEN = 'bench-tenants-admin-token-0123';

const appFields = (i: number) => ({ id: `app-${String(i).padStart(6, '0')}`, key: `key-${String(i).padStart(6, '0')}`, secret: `secret-${i}-0123456789abcdef` });

interface Node {
  child: ChildProcess;
  port: number;
  startMs: number;
  /** Its config file (rewritten before a SIGHUP). */
  file: string;
}

/** Spawns the built CLI with `config` on `dataDir`; resolves when it listens, with the time it took. */
async function startNode(config: object, dataDir: string): Promise<Node> {
  const file = join(dataDir, '..', `${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(config));
  const started = performance.now();
  const child = spawn(process.execPath, ['--max-semi-space-size=2', CLI, '--config', file], {
    env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: '0', HERALD_DATA_DIR: dataDir, HERALD_SHARDS: '1', HERALD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const port = await new Promise<number>((ok, fail) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(out);
      if (m) ok(Number(m[1]));
    });
    child.once('exit', (code) => fail(new Error(`herald exited with ${code}: ${out}`)));
  });
  return { child, port, startMs: performance.now() - started, file };
}

async function stopNode(node: Node): Promise<void> {
  const exited = new Promise((r) => node.child.once('exit', r));
  node.child.kill('SIGTERM');
  await exited;
}

/** RssAnon (KiB) 3 s after start-up and 20 s after it (V8 returns freed heap pages to the system some seconds after the garbage of the start-up is collected). */
async function settledAnonKb(node: Node): Promise<{ at3s: number; at20s: number }> {
  await sleep(3000);
  const at3s = readMemoryKb(node.child.pid!).anon;
  await sleep(17_000);
  return { at3s, at20s: readMemoryKb(node.child.pid!).anon };
}

/** A signed `GET /apps/<id>/channels` (the pusher SDK's signature): its status. */
async function signedGet(port: number, app: { id: string; key: string; secret: string }): Promise<number> {
  const path = `/apps/${app.id}/channels`;
  const params = `auth_key=${app.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0`;
  const signature = createHmac('sha256', app.secret).update(`GET\n${path}\n${params}`).digest('hex');
  return (await fetch(`http://127.0.0.1:${port}${path}?${params}&auth_signature=${signature}`)).status;
}

/**
 * SIGHUP with one app's secret changed in the file: ms until a request signed with the new
 * secret is accepted (polled back to back).
 */
async function reloadOneAppMs(node: Node, apps: { id: string; key: string; secret: string }[]): Promise<number> {
  const changed = { ...apps[0]!, secret: 'rotated-by-sighup-0123456789' };
  writeFileSync(node.file, JSON.stringify({ apps: [changed, ...apps.slice(1)], push: [] }));
  const sent = performance.now();
  node.child.kill('SIGHUP');
  while ((await signedGet(node.port, changed)) !== 200) {
    if (performance.now() - sent > 60_000) throw new Error('the reload did not take effect within 60 s');
  }
  return performance.now() - sent;
}

function table(rows: Record<string, string | number>[]): void {
  console.table(rows);
}

const root = mkdtempSync(join(tmpdir(), 'herald-bench-tenants-'));

// --- 1. start-up with apps in the config file ------------------------------------------------
async function startupSection(): Promise<void> {
  const startups: Record<string, string | number>[] = [];
  const anon: number[] = [];
  for (const count of [1, APPS]) {
    const dataDir = mkdtempSync(join(root, 'file-'));
    const apps = Array.from({ length: count }, (_, i) => appFields(i));
    const node = await startNode({ apps, push: [] }, dataDir);
    const memory = await settledAnonKb(node);
    anon.push(memory.at20s);
    const reloadMs = await reloadOneAppMs(node, apps);
    startups.push({
      phase: `${count} app(s) in the config file`,
      'ms to listening': Math.round(node.startMs),
      'RssAnon MiB at 3 s': +(memory.at3s / 1024).toFixed(1),
      'at 20 s': +(memory.at20s / 1024).toFixed(1),
      'SIGHUP, one app changed: ms to effect': Math.round(reloadMs),
    });
    await stopNode(node);
  }
  console.log(`\n1. Start-up and reload (1 shard); memory per app = (RssAnon at 20 s with ${APPS} - with 1) / ${APPS - 1}`);
  table(startups);
  console.log(`memory per app: ${(((anon[1]! - anon[0]!) * 1024) / (APPS - 1)).toFixed(0)} bytes`);

}

// --- 2. per-request and per-connection lookup ----------------------------------------------
async function lookupSection(): Promise<void> {
  const notUsed = (): never => {
    throw new Error('not used');
  };
  const adapter = {
    publish: () => undefined, storeCachedEvent: notUsed, clientEvent: notUsed, subscribe: notUsed, unsubscribe: notUsed, channelInfo: notUsed,
    listChannels: notUsed, presenceUserIds: notUsed, terminateUserConnections: notUsed, attach: notUsed, detach: notUsed, userPresence: notUsed,
    watch: notUsed, connectionCount: notUsed,
  } as unknown as ChannelAdapter;
  const bench = new Bench({ time: 1000 });
  const results: Record<string, string | number>[] = [];
  for (const count of [1, APPS]) {
    const apps: AppConfig[] = Array.from({ length: count }, (_, i) => appSchema.parse(appFields(i)));
    const appsByKey = new Map(apps.map((a) => [a.key, a]));
    const app = apps[Math.floor(count / 2)]!;
    const body = Buffer.from(JSON.stringify({ name: 'e', channel: 'c', data: '{}' }));
    const path = `/apps/${app.id}/events`;
    const params = `auth_key=${app.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0&body_md5=${createHash('md5').update(body).digest('hex')}`;
    const signature = createHmac('sha256', app.secret).update(`POST\n${path}\n${params}`).digest('hex');
    const rc: RequestContext = { method: 'post', path, query: `${params}&auth_signature=${signature}`, headers: {}, params: { appId: app.id }, body, remoteAddress: '127.0.0.1' };
    const handler = signedHandler({ appsByKey }, (r) => triggerEvent(adapter, new MessageQuota(), r));
    const reply = handler(rc);
    if (reply instanceof Promise || reply.status !== 200) throw new Error(`trigger did not answer 200: ${JSON.stringify(reply)}`);
    bench.add(`C1 trigger, app among ${count}`, () => {
      handler(rc);
    });
    bench.add(`WebSocket handshake parse, app among ${count}`, () => {
      parseHandshake(`/app/${app.key}`, 'protocol=7&client=js&version=8.4.0', appsByKey);
    });
  }
  await bench.run();
  for (const task of bench.tasks) {
    const mean = task.result && 'latency' in task.result ? task.result.latency.mean : NaN;
    results.push({ task: task.name, 'mean µs': +(mean * 1000).toFixed(2) });
  }
  console.log(`\n2. Lookup per request and per connection (this process); ratio = among ${APPS} / among 1`);
  table(results);
  console.log(`ratio C1: ${(Number(results[2]!['mean µs']) / Number(results[0]!['mean µs'])).toFixed(2)}, handshake: ${(Number(results[3]!['mean µs']) / Number(results[1]!['mean µs'])).toFixed(2)}`);

}

// --- 3. apps through the admin API -----------------------------------------------------------
async function apiSection(): Promise<void> {
  const dataDir = mkdtempSync(join(root, 'api-'));
  const config = { admin: { token: TOKEN }, apps: [appFields(999_999)], push: [] };
  let node = await startNode(config, dataDir);
  const adminFetch = (path: string, method: string, body?: object) =>
    fetch(`http://127.0.0.1:${node.port}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body && { body: JSON.stringify(body) }),
    });
  const patchTimes = async (): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t = performance.now();
      const res = await adminFetch('/apps/app-000001', 'PATCH', { maxConnections: 100 + i });
      if (res.status !== 200) throw new Error(`PATCH answered ${res.status}`);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return times[25]!;
  };
  const create = async (from: number, to: number): Promise<void> => {
    let next = from;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < to) {
          const res = await adminFetch('/apps', 'POST', appFields(next++));
          if (res.status !== 201) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
        }
      }),
    );
  };
  await create(0, 10);
  const patchSmall = await patchTimes();
  const created = performance.now();
  await create(10, API_APPS);
  const createMs = performance.now() - created;
  const patchLarge = await patchTimes();
  const anonApi = await settledAnonKb(node);
  await stopNode(node);
  node = await startNode(config, dataDir);
  const listed = (await (await adminFetch('/apps?limit=1&filter=app-000002', 'GET')).json()) as { apps: unknown[] };
  if (listed.apps.length !== 1) throw new Error('the stored apps were not read back');
  const restartAnon = await settledAnonKb(node);
  await stopNode(node);
  console.log(`\n3. Admin API (1 shard, LMDB): ${API_APPS} apps created 16 at a time`);
  table([
    { figure: `POST /admin/v1/apps, ${API_APPS - 10} creates`, value: `${Math.round(createMs)} ms (${((API_APPS - 10) / (createMs / 1000)).toFixed(0)}/s)` },
    { figure: 'PATCH one app, median of 50, with 10 apps', value: `${patchSmall.toFixed(2)} ms` },
    { figure: `PATCH one app, median of 50, with ${API_APPS} apps`, value: `${patchLarge.toFixed(2)} ms` },
    { figure: `RssAnon with ${API_APPS} API apps (before restart), at 3 s / 20 s`, value: `${(anonApi.at3s / 1024).toFixed(1)} / ${(anonApi.at20s / 1024).toFixed(1)} MiB` },
    { figure: `start-up with ${API_APPS} stored apps`, value: `${Math.round(node.startMs)} ms` },
    { figure: 'RssAnon after that start-up, at 3 s / 20 s', value: `${(restartAnon.at3s / 1024).toFixed(1)} / ${(restartAnon.at20s / 1024).toFixed(1)} MiB` },
  ]);
}

// --- 4. scale: creates in batches, the overview, triggers beside a dashboard ------------------
/** How long each trigger phase runs, ms, and the triggers in flight during it. */
const TRIGGER_PHASE_MS = 12_000;
const TRIGGERS_IN_FLIGHT = 8;
/** The dashboard's overview poll interval, ms. */
const DASHBOARD_POLL_MS = 3000;
/** Apps created before the timed batches (and counted in none of them). */
const SCALE_WARM_UP = 200;

function adminRequest(port: number, path: string, method = 'GET', body?: object): Promise<Response> {
  return fetch(`http://127.0.0.1:${port}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body && { body: JSON.stringify(body) }),
  });
}

/** A signed C1 trigger of one event; resolves with its latency, ms. */
async function triggerMs(port: number, app: { id: string; key: string; secret: string }, n: number): Promise<number> {
  const body = JSON.stringify({ name: 'bench', channel: `bench-${n % 64}`, data: '{}' });
  const path = `/apps/${app.id}/events`;
  const params = `auth_key=${app.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0&body_md5=${createHash('md5').update(body).digest('hex')}`;
  const signature = createHmac('sha256', app.secret).update(`POST\n${path}\n${params}`).digest('hex');
  const t = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}${path}?${params}&auth_signature=${signature}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`trigger answered ${res.status}`);
  return performance.now() - t;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** One GET of the overview as the dashboard asks it: ms and bytes of the answer. */
async function overviewOnce(port: number): Promise<{ ms: number; bytes: number }> {
  const t = performance.now();
  const res = await adminRequest(port, '/overview');
  const bytes = (await res.arrayBuffer()).byteLength;
  if (res.status !== 200) throw new Error(`overview answered ${res.status}`);
  return { ms: performance.now() - t, bytes };
}

/** Triggers for TRIGGER_PHASE_MS, `TRIGGERS_IN_FLIGHT` at a time, with or without a dashboard-like poller. */
async function triggerPhase(port: number, app: { id: string; key: string; secret: string }, withPoller: boolean) {
  const latencies: number[] = [];
  const polls: { ms: number; bytes: number }[] = [];
  const until = performance.now() + TRIGGER_PHASE_MS;
  let n = 0;
  const poller = withPoller
    ? (async () => {
        while (performance.now() < until) {
          polls.push(await overviewOnce(port));
          await sleep(DASHBOARD_POLL_MS);
        }
      })()
    : Promise.resolve();
  await Promise.all(
    Array.from({ length: TRIGGERS_IN_FLIGHT }, async () => {
      while (performance.now() < until) latencies.push(await triggerMs(port, app, n++));
    }),
  );
  await poller;
  latencies.sort((a, b) => a - b);
  return { count: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies[latencies.length - 1]!, polls };
}

async function scaleSection(): Promise<void> {
  const dataDir = mkdtempSync(join(root, 'scale-'));
  const triggerApp = appFields(999_999);
  const node = await startNode({ admin: { token: TOKEN }, apps: [triggerApp], push: [] }, dataDir);
  try {
    const batches: Record<string, string | number>[] = [];
    const batchMs: number[] = [];
    // Warm-up (not timed): the first requests of a process pay for compiling its code.
    for (let i = 0; i < SCALE_WARM_UP; i++) {
      const res = await adminRequest(node.port, '/apps', 'POST', { id: `warm-up-${i}`, key: `warm-up-key-${i}` });
      if (res.status !== 201) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
    }
    for (let from = 0; from < SCALE_APPS; from += 1000) {
      const to = Math.min(SCALE_APPS, from + 1000);
      let next = from;
      const t = performance.now();
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < to) {
            const res = await adminRequest(node.port, '/apps', 'POST', appFields(next++));
            if (res.status !== 201) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
          }
        }),
      );
      const ms = performance.now() - t;
      batchMs.push(ms);
      batches.push({ apps: `${from + 1}-${to}`, ms: Math.round(ms), 'µs per create': Math.round((ms * 1000) / (to - from)) });
    }
    console.log(`\n4a. ${SCALE_APPS} apps created through POST /admin/v1/apps, 16 at a time, in batches of 1,000 (1 shard; ${SCALE_WARM_UP} created before, untimed)`);
    table(batches);
    console.log(`ratio last batch / first batch: ${(batchMs[batchMs.length - 1]! / batchMs[0]!).toFixed(2)}`);

    await overviewOnce(node.port);
    const answers: { ms: number; bytes: number }[] = [];
    for (let i = 0; i < 10; i++) answers.push(await overviewOnce(node.port));
    const times = answers.map((a) => a.ms).sort((a, b) => a - b);
    console.log(`\n4b. GET /admin/v1/overview (as the dashboard asks it) with ${SCALE_APPS + SCALE_WARM_UP + 1} apps, 10 answers`);
    table([{ 'median ms': +percentile(times, 50).toFixed(1), 'max ms': +times[times.length - 1]!.toFixed(1), bytes: answers[0]!.bytes }]);

    const without = await triggerPhase(node.port, triggerApp, false);
    const withTab = await triggerPhase(node.port, triggerApp, true);
    console.log(`\n4c. C1 triggers, ${TRIGGERS_IN_FLIGHT} in flight for ${TRIGGER_PHASE_MS / 1000} s, without and with an overview poll every ${DASHBOARD_POLL_MS / 1000} s`);
    table(
      [
        { phase: 'no dashboard', ...without },
        { phase: 'overview polled', ...withTab },
      ].map(({ phase, count, p50, p99, max, polls }) => ({
        phase,
        triggers: count,
        'p50 ms': +p50.toFixed(2),
        'p99 ms': +p99.toFixed(2),
        'max ms': +max.toFixed(1),
        'overview ms (each poll)': polls.map((p) => Math.round(p.ms)).join(' '),
      })),
    );
    console.log(`ratio p99 with / without the poller: ${(withTab.p99 / without.p99).toFixed(2)}`);
  } finally {
    await stopNode(node);
  }
}

try {
  if (SECTIONS.has('startup')) await startupSection();
  if (SECTIONS.has('lookup')) await lookupSection();
  if (SECTIONS.has('api')) await apiSection();
  if (SECTIONS.has('scale')) await scaleSection();
} finally {
  rmSync(root, { recursive: true, force: true });
}
