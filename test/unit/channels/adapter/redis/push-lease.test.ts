/** The push instance lease on a real private redis-server: one live node per instance. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PushLeaseHeldError } from '../../../../../src/channels/adapter/redis/push-lease.js';
import { SimulatedNode } from '../../../../helpers/cluster-nodes.js';
import { RedisServer, waitFor } from '../../../../helpers/redis-server.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
let redis: RedisServer;
const nodes: SimulatedNode[] = [];
let counter = 0;

async function started(nodeTimeoutMs: number, ...ids: string[]): Promise<SimulatedNode[]> {
  const prefix = `l${++counter}:`;
  const list = ids.map((nodeId) => new SimulatedNode({ redisUrl: redis.url, nodeId, keyPrefix: prefix, nodeTimeoutMs }));
  nodes.push(...list);
  await Promise.all(list.map((n) => n.start()));
  return list;
}

beforeAll(async () => {
  redis = await new RedisServer().start();
});

afterEach(async () => {
  await Promise.allSettled(nodes.splice(0).map((n) => n.node.stop(false)));
});

afterAll(async () => {
  await redis.stop();
});

describe('PushInstanceLease', () => {
  it('refuses a second node while the first renews its lease, naming the holder', async () => {
    const [a, b] = await started(1000, 'a', 'b');
    const lease = await a.node.leasePushInstance(INSTANCE);
    await new Promise((r) => setTimeout(r, 1200)); // longer than the TTL: renewals keep it
    const err = await b.node.leasePushInstance(INSTANCE, { waitMs: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PushLeaseHeldError);
    expect((err as PushLeaseHeldError).holder).toBe(lease.holder);
    expect(lease.isHeld).toBe(true);
  });

  it('lets a node take over once the holder crashed and its lease lapsed, or at once after a release', async () => {
    const [a, b, c] = await started(400, 'a', 'b', 'c');
    await a.node.leasePushInstance(INSTANCE);
    a.node.crash();
    const taken = await b.node.leasePushInstance(INSTANCE); // waits up to nodeTimeoutMs for the lapse
    expect(taken.isHeld).toBe(true);
    await taken.release();
    expect((await c.node.leasePushInstance(INSTANCE)).isHeld).toBe(true);
  });

  it('takes a lapsed lease back after a Redis restart, and reports a lease another node took', async () => {
    const [a] = await started(1000, 'a');
    const lost: (string | null)[] = [];
    const lease = await a.node.leasePushInstance(INSTANCE, { onLost: (_id, holder) => lost.push(holder) });
    await redis.kill();
    await redis.start(); // empty: the lease is gone
    await waitFor(async () => {
      const client = redis.client();
      try {
        return (await client.get(`l${counter}:lease:push:${INSTANCE}`)) === lease.holder;
      } finally {
        client.disconnect();
      }
    }, 15_000, 'lease taken back');
    expect(lease.isHeld).toBe(true);
    // Someone else holds it now (e.g. it lapsed and another node started): the holder is told.
    const client = redis.client();
    await client.set(`l${counter}:lease:push:${INSTANCE}`, 'other/1234', 'PX', 10_000);
    await client.quit();
    await waitFor(() => lost.length === 1, 15_000, 'lease reported lost');
    expect(lost).toEqual(['other/1234']);
    expect(lease.isHeld).toBe(false);
  });

  it('keeps leases of different instances and clusters apart', async () => {
    const [a] = await started(400, 'a');
    const [b] = await started(400, 'b');
    await a.node.leasePushInstance(INSTANCE);
    expect((await b.node.leasePushInstance(INSTANCE)).isHeld).toBe(true); // other keyPrefix
    expect((await a.node.leasePushInstance('00000000-0000-4000-8000-000000000000')).isHeld).toBe(true);
  });
});
