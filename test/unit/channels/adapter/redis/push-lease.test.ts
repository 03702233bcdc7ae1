/** The push instance lease on a real private redis-server: one live node per instance. */
import { describe, expect, it } from 'vitest';
import { PushLeaseHeldError } from '../../../../../src/channels/adapter/redis/push-lease.js';
import { clusterTestBed, type SimulatedNode } from '../../../../helpers/cluster-nodes.js';
import { sleep, until } from '../../../../helpers/wait.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const bed = clusterTestBed('l');
/** The key prefix of the nodes the running test started. */
let prefix = '';

async function started(nodeTimeoutMs: number, ...ids: string[]): Promise<SimulatedNode[]> {
  prefix = bed.prefix();
  const list = ids.map((nodeId) => bed.node({ nodeId, keyPrefix: prefix, nodeTimeoutMs }));
  await Promise.all(list.map((n) => n.start()));
  return list;
}

describe('PushInstanceLease', () => {
  it('refuses a second node while the first renews its lease, naming the holder', async () => {
    const [a, b] = await started(1000, 'a', 'b');
    const lease = await a.node.leasePushInstance(INSTANCE);
    // time: longer than the 1 s TTL: only the renewals keep the lease.
    await sleep(1200);
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
    await bed.redis.kill();
    await bed.redis.start(); // empty: the lease is gone
    await until(async () => {
      const client = bed.redis.client();
      try {
        return (await client.get(`${prefix}lease:push:${INSTANCE}`)) === lease.holder;
      } finally {
        client.disconnect();
      }
    }, 'lease taken back', 15_000);
    expect(lease.isHeld).toBe(true);
    // Someone else holds it now (e.g. it lapsed and another node started): the holder is told.
    const client = bed.redis.client();
    await client.set(`${prefix}lease:push:${INSTANCE}`, 'other/1234', 'PX', 10_000);
    await client.quit();
    await until(() => lost.length === 1, 'lease reported lost', 15_000);
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
