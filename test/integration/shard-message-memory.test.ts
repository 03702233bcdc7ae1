/**
 * Memory of messages between the main thread and the shards is proportional to each
 * message's own size, whatever was sent before (issue 12, item 1). One large shard answer (the
 * channel list of tens of thousands of occupied channels, shard → main) and one large request
 * (a publish to 1,000 long user ids, main → shard) are followed by ordinary traffic; the
 * server's resident memory (read from /proc, as an operator sees it) must stay within a bound.
 * Before the fix every later message crossed threads carrying the whole grown msgpackr buffer
 * of the largest message so far: a few hundred small requests took gigabytes.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk, channelsSdk } from '../helpers/sdk-clients.js';
import { sleep } from '../helpers/wait.js';

const APP = { id: 'mem-app', key: 'mem-key', secret: 'mem-secret' };
/** Occupied channels: 20 sockets × 1,000 channels with ~100-character names (~2 MB list answer). */
const SOCKETS = 20;
const CHANNELS_PER_SOCKET = 1000;
/** Ordinary traffic after the large messages: one socket subscribing to 1,000 channels at once, then this many channel info reads. */
const ORDINARY_REQUESTS = 2000;
/** Growth of resident memory allowed over the ordinary traffic (bytes). */
const RSS_GROWTH_BOUND = 100 * 1024 * 1024;

let herald: HeraldProcess;
const sockets: WebSocket[] = [];

beforeAll(async () => {
  herald = await startHerald({ shards: 1, config: { apps: [APP], push: [{ ...DEFAULT_PUSH, web: null }] } });
});
afterAll(async () => {
  for (const ws of sockets) ws.terminate();
  await herald?.dispose();
});

function channelName(socket: number, n: number): string {
  return `occupied-${socket}-${n}-`.padEnd(100, 'x');
}

/** Resident memory of the server process (bytes), from /proc. */
function serverRss(): number {
  const status = readFileSync(`/proc/${herald.child!.pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (!kb) throw new Error('no VmRSS in /proc status');
  return Number(kb[1]) * 1024;
}

/** Opens a raw socket and subscribes it to `channels`, resolving once every one succeeded. */
async function subscribeAll(channels: string[]): Promise<void> {
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
  sockets.push(ws);
  const pending = new Set(channels);
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('message', (raw: Buffer) => {
      const frame = JSON.parse(raw.toString()) as { event: string; channel?: string };
      if (frame.event === 'pusher:connection_established') {
        for (const channel of channels) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
      } else if (frame.event === 'pusher_internal:subscription_succeeded' && frame.channel !== undefined) {
        pending.delete(frame.channel);
        if (pending.size === 0) resolve();
      } else if (frame.event === 'pusher:subscription_error') {
        reject(new Error(`subscription_error on ${frame.channel}`));
      }
    });
  });
}

/**
 * One socket subscribing to 1,000 new channels at once, then `count` channel info reads (100
 * at a time), while sampling the server's peak RSS.
 */
async function ordinaryTraffic(count: number): Promise<{ peak: number; failure: unknown }> {
  const sdk = channelsSdk(herald.port, APP);
  let peak = serverRss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, serverRss());
  }, 20);
  let failure: unknown;
  try {
    // Any failure is reported after the memory bound, the point of this test.
    await subscribeAll(Array.from({ length: 1000 }, (_, n) => `ordinary-${n}`)).catch((err: unknown) => (failure ??= err));
    let next = 0;
    await Promise.all(
      Array.from({ length: 100 }, async () => {
        while (next < count) {
          const n = next++;
          await sdk.get({ path: `/channels/${channelName(n % SOCKETS, n)}` }).catch((err: unknown) => (failure ??= err));
        }
      }),
    );
    // time: the sampler watches resident memory for half a second more (memory the last answers took shows late).
    await sleep(500);
  } finally {
    clearInterval(sampler);
  }
  return { peak: Math.max(peak, serverRss()), failure };
}

describe('shard message memory', () => {
  it('stays proportional to each message after a large answer and a large request', { timeout: 120_000 }, async () => {
    for (let s = 0; s < SOCKETS; s++) {
      await subscribeAll(Array.from({ length: CHANNELS_PER_SOCKET }, (_, n) => channelName(s, n)));
    }
    const sdk = channelsSdk(herald.port, APP);

    // Shard → main: one answer of ~2 MB.
    const list = await sdk.get({ path: '/channels' });
    expect(Object.keys(((await list.json()) as { channels: Record<string, unknown> }).channels)).toHaveLength(SOCKETS * CHANNELS_PER_SOCKET);
    // Main → shard: one request of ~200 KB.
    const users = Array.from({ length: 1000 }, (_, i) => `user-${i}-`.padEnd(164, 'u'));
    await beamsSdk(herald.port).publishToUsers(users, { fcm: { notification: { title: 'hello', body: 'x'.repeat(1000) } } });

    const before = serverRss();
    const { peak, failure } = await ordinaryTraffic(ORDINARY_REQUESTS);
    console.log('shard message memory', JSON.stringify({ rssBeforeMb: Math.round(before / 2 ** 20), rssPeakMb: Math.round(peak / 2 ** 20) }));
    expect(peak - before, `RSS grew from ${Math.round(before / 2 ** 20)} MB to a peak of ${Math.round(peak / 2 ** 20)} MB`).toBeLessThan(RSS_GROWTH_BOUND);
    expect(failure).toBeUndefined();
  });
});
