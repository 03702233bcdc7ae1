/**
 * The Redis cluster building blocks (src/channels/adapter/redis/) on a private redis-server
 * started for the run (skipped when `redis-server` is not installed): a join + leave pair, the
 * same auto-pipelined 100 at a time, C4 from shared state, and frames from one node to another
 * over the delivery bus. Prints Redis memory per recorded subscription once.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { Redis } from 'ioredis';
import { ClusterNode } from '../../../../src/channels/adapter/redis/cluster-node.js';
import { Cluster } from '../../../../src/cluster/cluster.js';
import type { MicroSuite } from '../../../micro-suite.js';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function node(url: string, nodeId: string, onFrame: () => void = () => {}): ClusterNode {
  return new ClusterNode(
    new Cluster({ redisUrl: url, keyPrefix: 'bench:', nodeTimeoutMs: 10_000 }, { nodeId }),
    { snapshot: () => ({ sockets: [], subscriptions: [] }), onTransitions: () => {}, onFrame },
  );
}

export const suite: MicroSuite = {
  source: 'src/channels/adapter/redis/ (channel-state.ts, delivery-bus.ts)',
  minIterations: 32,
  async setup(bench) {
    if (spawnSync('redis-server', ['--version']).status !== 0) return { skip: 'redis-server not installed' };
    const port = await freePort();
    const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', tmpdir(), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    const url = `redis://127.0.0.1:${port}`;
    const admin = new Redis(url, { retryStrategy: () => 20 });
    admin.on('error', () => {}); // refused until redis-server listens; retried
    await admin.ping();
    let received = 0;
    const a = await node(url, 'bench-a').start();
    const b = await node(url, 'bench-b', () => void received++).start();

    // Memory per subscription: 10,000 subscriptions on 100 channels (half presence).
    const before = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    const joins: Promise<unknown>[] = [];
    for (let c = 0; c < 100; c++) {
      for (let s = 0; s < 100; s++) {
        const channel = c % 2 ? `presence-m${c}` : `m${c}`;
        joins.push(a.state.join('app', channel, `${c}.${s}`, c % 2 ? { userId: `u${s}`, userInfo: { n: s } } : undefined));
      }
    }
    await Promise.all(joins);
    const after = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    process.stdout.write(`  Redis memory per subscription (10,000 on 100 channels, half presence): ${Math.round((after - before) / 10_000)} bytes\n`);
    await admin.flushall();
    await Promise.all([a.liveness.stop(false), b.liveness.stop(false)]);
    await a.liveness.start();
    await b.liveness.start();

    let n = 0;
    bench.add('join + leave, awaited one after the other (2 scripts)', async () => {
      const id = `s.${n++}`;
      await a.state.join('app', 'bench-channel', id);
      await a.state.leave('app', 'bench-channel', id);
    });
    bench.add('100 joins then 100 leaves issued together (auto-pipelined)', async () => {
      const base = n++;
      await Promise.all(Array.from({ length: 100 }, (_, i) => a.state.join('app', `pipe-${i % 10}`, `p.${base}.${i}`)));
      await Promise.all(Array.from({ length: 100 }, (_, i) => a.state.leave('app', `pipe-${i % 10}`, `p.${base}.${i}`)));
    });
    bench.add('C4 channel info from shared state', async () => {
      await a.state.channelInfo('app', 'bench-channel');
    });
    b.bus.watch('app', 'feed');
    while ((await a.bus.publish('app', 'feed', 'warm-up')) !== 1) await new Promise((r) => setTimeout(r, 10));
    const frame = JSON.stringify({ event: 'tick', channel: 'feed', data: JSON.stringify({ price: 101.25 }) });
    bench.add('100 frames published on node A, all delivered on node B', async () => {
      const target = received + 100;
      for (let i = 0; i < 100; i++) void a.bus.publish('app', 'feed', frame);
      while (received < target) await new Promise((r) => setImmediate(r));
    });
    return {
      teardown: async () => {
        await Promise.allSettled([a.stop(false), b.stop(false)]);
        await admin.quit();
        server.kill('SIGTERM');
      },
    };
  },
};
