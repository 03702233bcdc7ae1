/**
 * ThreadedTopicFanout across real worker threads: each runs a bare uWS App on its own port
 * (test/helpers/fanout-thread.mjs, built code from dist/) with real `ws` clients, and frames
 * published on one thread (or by the main thread as a producer) reach the clients of the others
 * through the shared rings.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import WebSocket from 'ws';
import { createFanoutBuffers, ThreadedTopicFanout, type FanoutInit } from '../../src/front-end/fanout.js';
import { InterestTable } from '../../src/front-end/interest.js';
import { REPO_ROOT } from '../helpers/herald-process.js';
import { nextEvent, until } from '../helpers/wait.js';

interface Reply {
  type: string;
  port?: number;
  delivered?: number;
}

class FrontEndThread {
  readonly replies: Reply[] = [];
  private readonly exited: Promise<unknown>;
  private constructor(
    readonly worker: Worker,
    readonly port: number,
  ) {
    this.exited = nextEvent(worker, 'exit', 'thread exit', 30_000);
  }

  /** `maxQueuedBytes`: the producer's bound on frames queued for a thread that holds its ring (default half the ring). */
  static async start(init: FanoutInit, thread: number, maxQueuedBytes?: number): Promise<FrontEndThread> {
    const worker = new Worker(join(REPO_ROOT, 'test/helpers/fanout-thread.mjs'), { workerData: { init, thread, root: REPO_ROOT, maxQueuedBytes } });
    const first = await nextEvent<Reply>(worker, 'message', `thread ${thread} listening`);
    const t = new FrontEndThread(worker, first.port!);
    worker.on('message', (reply: Reply) => t.replies.push(reply));
    return t;
  }

  async request(message: object, answer: string): Promise<Reply> {
    const before = this.replies.length;
    this.worker.postMessage(message);
    return until(() => this.replies.slice(before).find((r) => r.type === answer), answer);
  }

  publish(topic: string, frames: string[], except?: string): Promise<Reply> {
    return this.request({ type: 'publish', topic, frames, ...(except ? { except } : {}) }, 'published');
  }

  async stop(): Promise<number> {
    const reply = await this.request({ type: 'stop' }, 'stopped');
    await this.exited;
    return reply.delivered!;
  }
}

interface Client {
  ws: WebSocket;
  frames: string[];
}

async function connect(port: number, query: Record<string, string>): Promise<Client> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/?${new URLSearchParams(query)}`);
  const frames: string[] = [];
  let ready = false;
  ws.on('message', (data) => {
    const text = String(data);
    if (text === 'ready') ready = true;
    else frames.push(text);
  });
  await until(() => ready, 'client subscribed');
  return { ws, frames };
}

let threads: FrontEndThread[] = [];
let clients: Client[] = [];

afterEach(async () => {
  for (const c of clients) c.ws.terminate();
  clients = [];
  for (const t of threads) await t.stop();
  threads = [];
});

describe('ThreadedTopicFanout across worker threads', () => {
  it('delivers a publish of one thread to the clients of the others once, in order, and not to a thread without interest', async () => {
    const init = createFanoutBuffers({ threads: 3, ringBytes: 64 * 1024, maxFrameBytes: 10_000 });
    // One publish of 13 rings' worth queues all of it at once: no bound, nobody is dropped here.
    threads = await Promise.all([0, 1, 2].map((t) => FrontEndThread.start(init, t, Infinity)));
    const [t0, t1, t2] = threads as [FrontEndThread, FrontEndThread, FrontEndThread];
    const here = await connect(t0.port, { id: '0.1', topics: 'app:news' });
    const there = await connect(t1.port, { id: '1.1', topics: 'app:news,app:marker' });
    // Subscribed to the topic without the interest table knowing: it would see any frame sent to thread 2.
    const uninterested = await connect(t2.port, { id: '2.1', topics: 'app:marker', quiet: 'app:news' });
    clients = [here, there, uninterested];

    // Enough frames, of varied sizes, to wrap the 64 KiB ring several times.
    const frames = Array.from({ length: 400 }, (_, i) => JSON.stringify({ event: 'e', data: `${i}:${'é'.repeat(i % 700)}` }));
    await t0.publish('app:news', frames);
    await t0.publish('app:marker', ['marker']);
    await until(() => there.frames.length === frames.length + 1 && uninterested.frames.length === 1, 'frames and marker delivered');
    expect(there.frames).toEqual([...frames, 'marker']);
    expect(here.frames).toEqual(frames);
    // Records reach thread 2 in order: the marker came after where any news frame would be.
    expect(uninterested.frames).toEqual(['marker']);

    // A closed socket's topics leave the interest table (uWS' subscription handler on close).
    const table = new InterestTable(init.interest, 3);
    expect(table.maskFor('app:news', 2)).toBe(0b011);
    there.ws.close();
    await until(() => table.maskFor('app:news', 2) === 0b001, 'thread 1 no longer interested');
    here.ws.close();
    await until(() => table.maskFor('app:news', 2) === 0, 'thread 0 no longer interested');

    const delivered = await Promise.all(threads.map((t) => t.stop()));
    threads = [];
    clients = [];
    // Thread 1 counted its own deliveries from thread 0's ring (400 frames and the marker), thread 2 the marker.
    expect(delivered).toEqual([0, frames.length + 1, 1]);
  });

  it('excludes a socket on another thread, and carries the main thread frames', async () => {
    const init = createFanoutBuffers({ threads: 2, maxFrameBytes: 10_000 });
    threads = await Promise.all([0, 1].map((t) => FrontEndThread.start(init, t)));
    const [t0, t1] = threads as [FrontEndThread, FrontEndThread];
    // Socket ids carry their thread: (64 × n + t).
    const sender = await connect(t1.port, { id: '65.7', topics: 'app:chat' });
    const peer = await connect(t1.port, { id: '129.8', topics: 'app:chat' });
    const local = await connect(t0.port, { id: '64.9', topics: 'app:chat' });
    clients = [sender, peer, local];

    await t0.publish('app:chat', ['not to the sender'], '65.7');
    await t0.publish('app:chat', ['to all']);
    await until(() => peer.frames.length === 2 && sender.frames.length === 1 && local.frames.length === 2, 'frames delivered');
    expect(peer.frames).toEqual(['not to the sender', 'to all']);
    expect(local.frames).toEqual(['not to the sender', 'to all']);
    expect(sender.frames).toEqual(['to all']);

    // The main thread is producer `threads`: it has no subscribers of its own.
    const nobody = { publish: () => {}, numSubscribers: () => 0, publishFrom: () => {} };
    const main = new ThreadedTopicFanout(init, init.threads, nobody);
    main.publish('app:chat', 'from main');
    await until(() => peer.frames.length === 3 && local.frames.length === 3 && sender.frames.length === 2, 'main frame delivered');
    expect(sender.frames.at(-1)).toBe('from main');
    main.close();
  });
});
