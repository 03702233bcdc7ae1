/**
 * `npm run bench:listing [-- --channels N] [--listings N] [--rounds N] [--shards N] [--settle-ms MS]`:
 * what concurrent channel listings (C3, GET /apps/<id>/channels) cost the server's memory.
 * Starts the built CLI (as `npm start` runs it), occupies N public channels from a few `ws`
 * connections, then per round sends `--listings` signed listings at once and samples the
 * server's resident memory every 10 ms until every answer is in; after the last round it
 * closes every connection and waits `--settle-ms`. Prints, per step, VmRSS and RssAnon, the
 * answers' statuses and sizes. Figures only, never pass/fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { readMemoryKb } from '../../proc-stats.js';

const { values } = parseArgs({
  options: {
    channels: { type: 'string', default: '50000' },
    listings: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    shards: { type: 'string', default: '2' },
    'settle-ms': { type: 'string', default: '10000' },
  },
});
const CHANNELS = Number(values.channels);
const LISTINGS = Number(values.listings);
const ROUNDS = Number(values.rounds);
const SHARDS = Number(values.shards);
const SETTLE_MS = Number(values['settle-ms']);
const SUBSCRIBERS = 50;
const CLI = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../src/cli.js');
const APP = { id: 'listing-app', key: 'listing-key', secret: 'listing-secret' };

interface Row {
  step: string;
  rssMb: number;
  anonMb: number;
  note: string;
}
const rows: Row[] = [];
let server: ChildProcess | undefined;

function record(step: string, note = '', peak?: { rss: number; anon: number }): void {
  const now = peak ?? readMemoryKb(server!.pid!);
  rows.push({ step, rssMb: now.rss / 1024, anonMb: now.anon / 1024, note });
  process.stderr.write(`${step}: rss ${(now.rss / 1024).toFixed(0)} MB ${note}\n`);
}

async function startServer(dataDir: string): Promise<number> {
  const file = join(dataDir, 'herald.json');
  writeFileSync(file, JSON.stringify({ apps: [APP] }));
  server = spawn(process.execPath, ['--max-semi-space-size=2', CLI, '--config', file], {
    env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: '0', HERALD_DATA_DIR: join(dataDir, 'data'), HERALD_SHARDS: String(SHARDS), HERALD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise<number>((ok, fail) => {
    server!.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(out);
      if (m) ok(Number(m[1]));
    });
    server!.once('exit', (code) => fail(new Error(`herald exited with ${code}: ${out}`)));
  });
}

/** Opens one connection and subscribes it to `names`; resolves once every subscription succeeded. */
async function subscriber(port: number, names: string[]): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=bench&version=1`);
  let pending = names.length;
  await new Promise<void>((ok, fail) => {
    ws.on('error', fail);
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as { event: string };
      if (frame.event === 'pusher:connection_established') {
        for (const channel of names) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
      } else if (frame.event === 'pusher_internal:subscription_succeeded' && --pending === 0) ok();
      else if (frame.event === 'pusher:error' || frame.event === 'pusher:subscription_error') fail(new Error(String(raw)));
    });
  });
  return ws;
}

function signedListingUrl(port: number): string {
  const path = `/apps/${APP.id}/channels`;
  const query = `auth_key=${APP.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0`;
  const signature = createHmac('sha256', APP.secret).update(`GET\n${path}\n${query}`).digest('hex');
  return `http://127.0.0.1:${port}${path}?${query}&auth_signature=${signature}`;
}

/** `LISTINGS` listings at once; the peak memory seen while they ran and what they answered. */
async function listingRound(port: number): Promise<{ peak: { rss: number; anon: number }; note: string; ms: number }> {
  const peak = { rss: 0, anon: 0 };
  const sampler = setInterval(() => {
    const m = readMemoryKb(server!.pid!);
    peak.rss = Math.max(peak.rss, m.rss);
    peak.anon = Math.max(peak.anon, m.anon);
  }, 10);
  const started = performance.now();
  const answers = await Promise.all(
    Array.from({ length: LISTINGS }, async () => {
      const res = await fetch(signedListingUrl(port));
      const text = await res.text();
      let listed = 0;
      if (res.status === 200) listed = Object.keys((JSON.parse(text) as { channels: object }).channels).length;
      return { status: res.status, bytes: text.length, listed };
    }),
  );
  const ms = performance.now() - started;
  clearInterval(sampler);
  const statuses = new Map<number, number>();
  for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
  const ok = answers.filter((a) => a.status === 200);
  const listed = ok.length ? Math.max(...ok.map((a) => a.listed)) : 0;
  const bytes = ok.length ? Math.max(...ok.map((a) => a.bytes)) : 0;
  const note = `${[...statuses].map(([s, n]) => `${n}×${s}`).join(' ')}, ${listed} channels/answer, ${(bytes / 1024).toFixed(0)} KiB/answer, ${ms.toFixed(0)} ms`;
  return { peak, note, ms };
}

const dir = mkdtempSync(join(tmpdir(), 'herald-bench-listing-'));
try {
  const port = await startServer(dir);
  await sleep(2000);
  record('started');
  const sockets: WebSocket[] = [];
  const per = Math.ceil(CHANNELS / SUBSCRIBERS);
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const names = Array.from({ length: Math.min(per, CHANNELS - s * per) }, (_, i) => `bench-channel-${String(s * per + i).padStart(7, '0')}`);
    if (names.length > 0) sockets.push(await subscriber(port, names));
  }
  await sleep(2000);
  record(`${CHANNELS} channels occupied`);
  for (let round = 1; round <= ROUNDS; round++) {
    const { peak, note } = await listingRound(port);
    record(`round ${round}: peak during ${LISTINGS} listings`, note, peak);
    await sleep(2000);
    record(`round ${round}: 2 s after`);
  }
  for (const ws of sockets) ws.close();
  await sleep(SETTLE_MS);
  record(`every connection closed, ${SETTLE_MS / 1000} s after`);
} finally {
  server?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}

process.stdout.write(`\nchannel listings: ${CHANNELS} channels, ${LISTINGS} concurrent listings, ${SHARDS} shards\n\n`);
process.stdout.write(`${'step'.padEnd(44)} ${'VmRSS MB'.padStart(9)} ${'RssAnon MB'.padStart(11)}  answers\n`);
for (const r of rows) process.stdout.write(`${r.step.padEnd(44)} ${r.rssMb.toFixed(0).padStart(9)} ${r.anonMb.toFixed(0).padStart(11)}  ${r.note}\n`);
