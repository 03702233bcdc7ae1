/**
 * A front-end thread that falls behind (its event loop blocked by the test hook
 * `POST /debug/front-end/stall`) while the other thread publishes more than a producer queues for
 * it: the producer drops it and goes on (its own subscriber gets every event in order while the
 * stall lasts, and its queue stays bounded); once the stalled thread runs again it learns what it missed and
 * closes its subscribers of that channel with 4100 (after the events it did deliver, in order:
 * never a silent gap), keeps its other sockets, and serves again.
 *
 * HTTP requests go to a chosen thread over a keep-alive connection the kernel gave that thread
 * (`agentOnThread`); WebSockets are placed with rawConnectionOnThread.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request as httpRequest } from 'node:http';
import type WebSocket from 'ws';
import { rawConnectionOnThread } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { decodeFrame } from '../helpers/protocol-frame.js';
import { until } from '../helpers/wait.js';

const APP = { id: 'slow-app', key: 'slow-key', secret: 'slow-secret' };
/** How long the slow thread is blocked (ms): long enough for every publish to go through meanwhile. */
const STALL_MS = 8000;
/** Events published during the stall: 600 × 10 KB, past the 4 MiB ring plus the queue bound. */
const BATCHES = 60;
const PER_BATCH = 10;
const DATA = 'x'.repeat(10_000);

let herald: HeraldProcess;
const agents: Agent[] = [];

beforeAll(async () => {
  herald = await startHerald({ config: { frontEndThreads: 2, apps: [APP] }, env: { HERALD_TEST_HOOKS: '1' } });
});
afterAll(async () => {
  for (const agent of agents) agent.destroy();
  await herald?.dispose();
});

/** POST to `path` over `agent`; the JSON answer. */
function post(agent: Agent, path: string): Promise<{ thread: number }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: herald.port, path, method: 'POST', agent }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body) as { thread: number }) : reject(new Error(`${res.statusCode}: ${body}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A keep-alive agent of one connection that the kernel gave to front-end thread `thread`. */
async function agentOnThread(thread: number): Promise<Agent> {
  for (let attempt = 0; attempt < 60; attempt++) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    if ((await post(agent, '/debug/front-end/stall?stall_ms=0')).thread === thread) {
      agents.push(agent);
      return agent;
    }
    agent.destroy();
  }
  throw new Error(`no connection landed on front-end thread ${thread} in 60 tries`);
}

interface Subscriber {
  ws: WebSocket;
  closed: Promise<number>;
  /** `i` of each `n` event, in arrival order, and when the last arrived. */
  got: number[];
  lastAt: number;
  events: string[];
}

async function subscriberOnThread(thread: number, channel: string): Promise<Subscriber> {
  const { ws, closed } = await rawConnectionOnThread(herald, APP.key, thread);
  const sub: Subscriber = { ws, closed, got: [], lastAt: 0, events: [] };
  let subscribed = false;
  ws.on('message', (raw) => {
    const frame = decodeFrame(raw.toString());
    sub.events.push(frame.event);
    if (frame.event === 'pusher_internal:subscription_succeeded') subscribed = true;
    if (frame.event === 'n') {
      sub.got.push((frame.data as { i: number }).i);
      sub.lastAt = Date.now();
    }
  });
  ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
  await until(() => subscribed, `subscribed to ${channel} on thread ${thread}`);
  return sub;
}

describe('a front-end thread that falls behind', () => {
  it('is dropped past the bound: the others get every event meanwhile, its subscribers of the channel are closed with 4100, then it serves again', async () => {
    const publisher = await agentOnThread(0);
    const stalled = await agentOnThread(1);
    const fast = await subscriberOnThread(0, 'feed');
    const slow = await subscriberOnThread(1, 'feed');
    const quiet = await subscriberOnThread(1, 'quiet');
    const sdk = channelsSdk(herald.port, APP, { agent: publisher });

    const stall = await post(stalled, `/debug/front-end/stall?stall_ms=${STALL_MS}`);
    expect(stall.thread).toBe(1);
    const stallEnds = Date.now() + STALL_MS;
    for (let b = 0; b < BATCHES; b++) {
      await sdk.triggerBatch(Array.from({ length: PER_BATCH }, (_, k) => ({ channel: 'feed', name: 'n', data: JSON.stringify({ i: b * PER_BATCH + k, pad: DATA }) })));
    }
    const total = BATCHES * PER_BATCH;
    // One slow thread never stalls the others: thread 0 got everything, in order, while thread 1 was still blocked.
    await until(() => fast.got.length === total, () => `thread 0's subscriber to get ${total} events (has ${fast.got.length})`, STALL_MS);
    expect(fast.lastAt).toBeLessThan(stallEnds);
    expect(fast.got).toEqual([...Array(total).keys()]);
    expect((await post(publisher, '/debug/front-end/stall?stall_ms=0')).thread).toBe(0);

    // The stalled thread, running again: what it delivered is in order from the start, then 4100.
    let code: number | undefined;
    void slow.closed.then((c) => (code = c));
    await until(() => code !== undefined, "the stalled thread's subscriber to be closed", STALL_MS + 10_000);
    expect(code).toBe(4100);
    expect(slow.got).toEqual([...Array(slow.got.length).keys()]);
    expect(slow.got.length).toBeLessThan(total);
    expect(slow.events).toContain('pusher:error');
    await until(() => /missed frames/.test(herald.stdout + herald.stderr), 'the thread logs what it missed');

    // Its socket on another channel stays, and it is addressed again: a new subscriber gets what comes next.
    const again = await subscriberOnThread(1, 'feed');
    await sdk.trigger('quiet', 'n', { i: 0 });
    await sdk.trigger('feed', 'n', { i: 0 });
    await until(() => quiet.got.length === 1 && again.got.length === 1 && fast.got.length === total + 1, 'events after the stall');
    expect(quiet.events).not.toContain('pusher:error');
    for (const s of [fast, quiet, again]) s.ws.close();
  }, 60_000);
});
