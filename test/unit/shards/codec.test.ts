/**
 * The shard message codec: after a large message, a small one still owns a buffer of its own
 * size, also once posted to another thread (structured clone copies the whole backing buffer of
 * a view, which is how one large shard answer made every later message carry megabytes).
 */
import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import { ShardCodec } from '../../../src/shards/codec.js';

/** Posts bytes through a real MessagePort and resolves with what the other side received. */
function postAcross(bytes: Uint8Array): Promise<Uint8Array> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port2.once('message', (received: Uint8Array) => {
      port1.close();
      resolve(received);
    });
    port1.postMessage(bytes);
  });
}

describe('ShardCodec', () => {
  it('round-trips a message', () => {
    const codec = new ShardCodec();
    const value = { type: 'channels.subscribe', appId: 'a', channel: 'c', socketId: '1.2', member: { userId: 'u', userInfo: { n: 1 } } };
    expect(codec.decode(codec.encode(value))).toEqual(value);
  });

  it('gives each message a backing buffer of its own size, before and after a large one', async () => {
    const codec = new ShardCodec();
    const first = codec.encode({ ok: true, value: { subscriptionCount: 1 }, boot: 1 });
    expect(first.buffer.byteLength).toBe(first.byteLength);
    const large = codec.encode({ ok: true, value: { channels: Array.from({ length: 50_000 }, (_, i) => [`channel-${i}`, null]) }, boot: 1 });
    expect(large.byteLength).toBeGreaterThan(500_000);
    expect(large.buffer.byteLength).toBe(large.byteLength);
    for (let i = 0; i < 3; i++) {
      const small = codec.encode({ ok: true, value: { subscriptionCount: i }, boot: 1 });
      expect(small.byteLength).toBeLessThan(100);
      expect(small.buffer.byteLength).toBe(small.byteLength);
      const received = await postAcross(small);
      expect(received.buffer.byteLength).toBe(small.byteLength);
      expect(codec.decode(received)).toEqual({ ok: true, value: { subscriptionCount: i }, boot: 1 });
    }
  });

  it('releases the pack buffer msgpackr grew for a large message (it is one per thread, shared by every Packr)', () => {
    const codec = new ShardCodec();
    codec.encode({ ok: true, value: { apps: Array.from({ length: 50_000 }, (_, i) => ({ id: `app-${i}`, key: `key-${i}` })) }, boot: 1 });
    // Any Packr of this thread packs into that buffer: its view shows how large the buffer is.
    const view = new Packr({ useRecords: false }).pack({ small: true });
    expect(view.buffer.byteLength).toBeLessThan(64 * 1024);
  });
});
