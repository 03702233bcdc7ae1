/**
 * The floor under a cross-node delivery: one Redis pub/sub hop with nothing of Herald's in it.
 * The bench process publishes stamped messages (`@<monotonic µs>@` plus padding, like a bench
 * event) at a fixed rate with ioredis; a forked subscriber (this file, run as a child) records
 * publish → receive latency, so the hop crosses the same process boundaries and the same busy
 * scheduler as node 1 → redis-server → node 2.
 */
import { fork } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { monotonicUs, stampUs } from '../fanout/clock.js';
import { LatencyHistogram, type HistogramData, type LatencySummary } from '../fanout/latency-histogram.js';

const TOPIC = 'bench:hop';
const END = 'end';

/** `rate` messages/s for `ms` over the Redis at `url`: latency of the hop, as seen by another process. */
export async function measurePubSubHop(url: string, rate: number, ms: number, payloadBytes: number): Promise<LatencySummary> {
  const child = fork(fileURLToPath(import.meta.url), ['subscriber', url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const publisher = new Redis(url, { enableAutoPipelining: true });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`pub/sub hop subscriber exited with ${code}`)));
    });
    const padding = 'x'.repeat(Math.max(0, payloadBytes - 18));
    const total = Math.max(1, Math.round((rate * ms) / 1000));
    const start = performance.now();
    for (let i = 0; i < total; i++) {
      await publisher.publish(TOPIC, `@${stampUs()}@${padding}`);
      const wait = start + ((i + 1) / rate) * 1000 - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const result = new Promise<HistogramData>((resolve) => child.once('message', (data: HistogramData) => resolve(data)));
    await publisher.publish(TOPIC, END);
    const histogram = new LatencyHistogram();
    histogram.merge(await result);
    return histogram.summary();
  } finally {
    publisher.disconnect();
    child.kill('SIGKILL');
  }
}

async function subscriber(url: string): Promise<void> {
  const histogram = new LatencyHistogram();
  const redis = new Redis(url);
  redis.on('message', (_topic: string, message: string) => {
    if (message === END) {
      process.send!(histogram.toData());
      return;
    }
    histogram.record(monotonicUs() - Number(message.slice(1, message.indexOf('@', 1))));
  });
  await redis.subscribe(TOPIC);
  process.send!('ready');
}

if (process.argv[2] === 'subscriber') {
  process.on('disconnect', () => process.exit(0));
  void subscriber(process.argv[3]!);
}
