/**
 * Cross-node delivery over a real private redis-server: a node receives only the channels it
 * has local subscribers on, the except socket travels with the frame, a node drops its own
 * messages, and control messages reach every node or one node.
 */
import { describe, expect, it } from 'vitest';
import { clusterTestBed, type SimulatedNode } from '../../../../helpers/cluster-nodes.js';
import { flushedBy, until } from '../../../../helpers/wait.js';

const bed = clusterTestBed('b');

async function started(...ids: string[]): Promise<SimulatedNode[]> {
  const prefix = bed.prefix();
  const list = ids.map((nodeId) => bed.node({ nodeId, keyPrefix: prefix }));
  await Promise.all(list.map((n) => n.start()));
  return list;
}

describe('DeliveryBus', () => {
  it('delivers a frame only to nodes with local subscribers on the channel, with the except socket', async () => {
    const [a, b, c] = await started('a', 'b', 'c');
    await b.join('app', 'private-chat', 'b.1');
    // Redis counts the listeners: only b (c has no subscriber on the channel, a is the sender).
    await until(async () => (await a.node.bus.publish('app', 'private-chat', 'ready?')) === 1, 'b subscribed', 10_000);
    expect(await a.node.bus.publish('app', 'private-chat', '{"event":"x"}', 'b.1')).toBe(1);
    await until(() => b.frames.some((f) => f.frame === '{"event":"x"}'), 'frame on b', 10_000);
    expect(b.frames.find((f) => f.frame === '{"event":"x"}')).toEqual({ appId: 'app', channel: 'private-chat', frame: '{"event":"x"}', except: 'b.1' });
    expect(c.frames).toEqual([]);
    expect(c.node.bus.watchedCount()).toBe(0);
  });

  it('keeps one Redis subscription per channel per node, dropped with the last local subscriber', async () => {
    const [a, b] = await started('a', 'b');
    await b.join('app', 'news', 'b.1');
    await b.join('app', 'news', 'b.2');
    await until(async () => (await a.node.bus.publish('app', 'news', 'one')) === 1, 'b subscribed', 10_000);
    await b.leave('app', 'news', 'b.1');
    expect(await a.node.bus.publish('app', 'news', 'two')).toBe(1);
    await b.leave('app', 'news', 'b.2');
    await until(async () => (await a.node.bus.publish('app', 'news', 'three')) === 0, 'b unsubscribed', 10_000);
    expect(b.node.bus.watchedCount()).toBe(0);
  });

  it('drops its own messages (the origin delivers to its sockets itself) and carries frames verbatim', async () => {
    const [a, b] = await started('a', 'b');
    await a.join('app', 'both', 'a.1');
    await b.join('app', 'both', 'b.1');
    const frame = '{"event":"multi\\nline","data":"ünïcode \\u2028"}\n second line';
    await until(async () => (await a.node.bus.publish('app', 'both', frame)) === 2, 'both subscribed', 10_000);
    await until(() => b.frames.length > 0, 'frame on b', 10_000);
    // Redis delivers publishes in the order it took them: a marker b publishes after would come after a's own frame.
    await flushedBy(() => b.node.bus.publish('app', 'both', 'marker'), () => a.frames.some((f) => f.frame === 'marker'), 'the marker on a', 10_000);
    expect(a.frames.map((f) => f.frame)).toEqual(['marker']);
    expect(b.frames[0]!.frame).toBe(frame);
    expect(b.frames[0]!.except).toBeUndefined();
  });

  it('delivers the publishes of one turn in order, and before a control message issued after them', async () => {
    const [a, b] = await started('a', 'b');
    await b.join('app', 'burst', 'b.1');
    await until(async () => (await a.node.bus.publish('app', 'burst', 'ready?')) === 1, 'b subscribed', 10_000);
    await until(() => b.frames.length === 1, 'first frame on b', 10_000);
    // One turn: 50 publishes, then a control message, which must reach the other node after them.
    const sent = Array.from({ length: 50 }, (_, i) => a.node.bus.publish('app', 'burst', `f${i}`));
    const control = a.node.cluster.sendControl('b', { type: 'terminateUser', appId: 'app', userId: 'u' });
    expect(await Promise.all(sent)).toEqual(Array(50).fill(1));
    expect(await control).toBe(1);
    await until(() => b.controls.length === 1, 'control on b', 10_000);
    expect(b.arrivals.slice(1)).toEqual([...Array.from({ length: 50 }, (_, i) => `frame:f${i}`), 'control:terminateUser']);
  });

  it('sends control messages to every node or to one node', async () => {
    const [a, b, c] = await started('a', 'b', 'c');
    const terminate = { type: 'terminateUser' as const, appId: 'app', userId: 'mallory' };
    expect(await a.node.cluster.sendControl('all', terminate)).toBe(3);
    await until(() => [a, b, c].every((n) => n.controls.length === 1), 'control on every node', 10_000);
    expect(c.controls[0]).toEqual({ message: terminate, origin: 'a' });
    expect(await a.node.cluster.sendControl('c', terminate)).toBe(1);
    await until(() => c.controls.length === 2, 'control on c', 10_000);
    expect(b.controls).toHaveLength(1);
  });
});
