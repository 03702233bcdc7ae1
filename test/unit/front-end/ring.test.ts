import { describe, expect, it } from 'vitest';
import { RingReader, RingWriter, controlActive, controlInts, createRing, recordBound, type Missed, type RingBuffers } from '../../../src/front-end/ring.js';
import { until } from '../../helpers/wait.js';

interface Got {
  topic: string;
  frame: string;
  except: string;
}

function ringFor(readers: number, capacity: number): { ring: RingBuffers; control: SharedArrayBuffer } {
  const control = new SharedArrayBuffer(controlInts(readers) * 4);
  const flags = new Int32Array(control);
  for (let r = 0; r < readers; r++) flags[controlActive(readers, r)] = 1;
  return { ring: createRing(readers, capacity), control };
}

/** Drains `reader` into `into`; a gap (the reader was dropped) becomes an entry `{ gap }` in `gaps` and in `into` (topic '#gap'). */
function collect(reader: RingReader, into: Got[], gaps: Missed[] = []): number {
  return reader.drain(
    (topic, frame, except) => into.push({ topic, frame: Buffer.from(frame).toString('utf8'), except }),
    (missed) => {
      gaps.push(missed);
      into.push({ topic: '#gap', frame: '', except: '' });
    },
  );
}

/** A frame of `n` characters, some of them 2- and 3-byte UTF-8, numbered. */
function frameOf(i: number, n: number): string {
  const body = 'aé€'.repeat(Math.ceil(n / 3)).slice(0, n);
  return `${i}:${body}`;
}

describe('fanout ring', () => {
  it('keeps variable-length records in order across many wrap-arounds', () => {
    const { ring, control } = ringFor(1, 1024);
    const writer = new RingWriter(ring, control, 1);
    const reader = new RingReader(ring, 0);
    const got: Got[] = [];
    const sent: string[] = [];
    for (let i = 0; i < 500; i++) {
      const frame = frameOf(i, (i * 37) % 90);
      sent.push(frame);
      // Runs of one topic, and topics of one length that differ (the reader reuses a run's topic).
      writer.put(1, `app:ch-${Math.floor(i / 3) % 7}`, i % 5 === 0 ? `${i}.1` : '', frame);
      if (i % 3 === 2) collect(reader, got);
    }
    collect(reader, got);
    expect(writer.queued.records).toBe(0);
    expect(got.map((g) => g.frame)).toEqual(sent);
    expect(got.map((g) => g.topic)).toEqual(sent.map((_, i) => `app:ch-${Math.floor(i / 3) % 7}`));
    expect(got[5]).toEqual({ topic: 'app:ch-1', frame: sent[5], except: '5.1' });
    expect(got[6]!.except).toBe('');
  });

  it('takes a frame given as bytes', () => {
    const { ring, control } = ringFor(1, 256);
    const writer = new RingWriter(ring, control, 1);
    const got: Got[] = [];
    writer.put(1, 't', '', new TextEncoder().encode('{"event":"x"}'));
    collect(new RingReader(ring, 0), got);
    expect(got).toEqual([{ topic: 't', frame: '{"event":"x"}', except: '' }]);
  });

  it('queues records in order while the ring is full and writes them as the reader moves on', async () => {
    const { ring, control } = ringFor(1, 256);
    const writer = new RingWriter(ring, control, 1, { maxQueuedBytes: Infinity });
    const reader = new RingReader(ring, 0);
    const sent = Array.from({ length: 40 }, (_, i) => frameOf(i, 20));
    for (const frame of sent) writer.put(1, 't', '', frame);
    expect(writer.queued.records).toBeGreaterThan(20);
    const got: Got[] = [];
    await until(() => {
      collect(reader, got);
      return writer.queued.records === 0 && got.length === sent.length;
    }, 'every queued record read');
    expect(got.map((g) => g.frame)).toEqual(sent);
  });

  it('serves two readers at different speeds, each everything in order', async () => {
    const { ring, control } = ringFor(2, 512);
    const writer = new RingWriter(ring, control, 2, { maxQueuedBytes: Infinity });
    const fast = new RingReader(ring, 0);
    const slow = new RingReader(ring, 1);
    const fastGot: Got[] = [];
    const slowGot: Got[] = [];
    const sent: string[] = [];
    for (let i = 0; i < 200; i++) {
      sent.push(frameOf(i, i % 40));
      writer.put(0b11, 't', '', sent[i]!);
      collect(fast, fastGot);
      if (i % 25 === 0) collect(slow, slowGot);
    }
    // The slow reader held the ring: the fast one is not past what the slow one let through.
    expect(writer.queued.records).toBeGreaterThan(0);
    await until(() => {
      collect(fast, fastGot);
      collect(slow, slowGot);
      return writer.queued.records === 0 && slowGot.length === sent.length && fastGot.length === sent.length;
    }, 'both readers at the end');
    expect(fastGot.map((g) => g.frame)).toEqual(sent);
    expect(slowGot.map((g) => g.frame)).toEqual(sent);
  });

  it('gives each reader only the records addressed to it, and a reader left out still moves on', () => {
    const { ring, control } = ringFor(3, 256);
    const writer = new RingWriter(ring, control, 3);
    const readers = [0, 1, 2].map((r) => new RingReader(ring, r));
    const got: Got[][] = [[], [], []];
    for (let i = 0; i < 60; i++) {
      writer.put(i % 3 === 0 ? 0b001 : i % 3 === 1 ? 0b010 : 0b011, 't', '', String(i));
      readers.forEach((reader, r) => collect(reader, got[r]!));
    }
    expect(writer.queued.records).toBe(0);
    const numbers = (r: number): number[] => got[r]!.map((g) => Number(g.frame));
    expect(numbers(0)).toEqual([...Array(60).keys()].filter((i) => i % 3 !== 1));
    expect(numbers(1)).toEqual([...Array(60).keys()].filter((i) => i % 3 !== 0));
    expect(numbers(2)).toEqual([]);
    expect(readers[2]!.lag()).toBe(0);
  });

  it('drops a reader that holds the ring past the bound: the others go on, it gets a gap listing the topics, then every later record', async () => {
    const { ring, control } = ringFor(2, 1024);
    const dropped: number[][] = [];
    let queuedAtDrop = 0;
    const writer = new RingWriter(ring, control, 2, {
      maxQueuedBytes: 512,
      onReadersDropped: (readers, queued) => {
        dropped.push(readers);
        queuedAtDrop = queued;
      },
    });
    const fast = new RingReader(ring, 0);
    const stuck = new RingReader(ring, 1);
    const fastGot: Got[] = [];
    const sent: string[] = [];
    for (let i = 0; i < 100; i++) {
      sent.push(frameOf(i, 20));
      writer.put(0b11, i % 2 === 0 ? 'a' : 'b', '', sent[i]!);
      collect(fast, fastGot);
    }
    // Dropped once the queue passed 512 bytes: the fast reader was not held back beyond that.
    await until(() => {
      collect(fast, fastGot);
      return fastGot.length === sent.length && writer.queued.records === 0;
    }, () => `the fast reader at the end: ${fastGot.length} ${JSON.stringify(writer.queued)} ${writer.droppedReaders}`);
    expect(fastGot.map((g) => g.frame)).toEqual(sent);
    expect(dropped).toEqual([[1]]);
    // Dropped at the record that passed the bound.
    expect(queuedAtDrop).toBeGreaterThan(512);
    expect(queuedAtDrop).toBeLessThanOrEqual(512 + recordBound(1, 0, 3 * 23));
    expect(writer.droppedReaders).toBe(0b10);

    // The stuck reader runs again: it asks to rejoin, reading nothing, and is addressed again.
    const stuckGot: Got[] = [];
    const gaps: Missed[] = [];
    expect(collect(stuck, stuckGot, gaps)).toBe(0);
    await until(() => writer.droppedReaders === 0, 'the writer takes the reader back');
    writer.put(0b11, 'c', '', 'after');
    await until(() => {
      collect(fast, fastGot);
      collect(stuck, stuckGot, gaps);
      return stuckGot.length === 2;
    }, 'the gap and the next record');
    expect(stuckGot.map((g) => g.topic)).toEqual(['#gap', 'c']);
    expect(gaps[0]!.records).toBe(100);
    expect([...gaps[0]!.topics!].sort()).toEqual(['a', 'b']);
    expect(fastGot.at(-1)!.frame).toBe('after');
  });

  it('a reader dropped again before it read its gap gets one gap for both', async () => {
    const { ring, control } = ringFor(2, 1024);
    const writer = new RingWriter(ring, control, 2, { maxQueuedBytes: 512 });
    const fast = new RingReader(ring, 0);
    const stuck = new RingReader(ring, 1);
    const fastGot: Got[] = [];
    const burst = async (topic: string): Promise<void> => {
      for (let i = 0; i < 60; i++) {
        writer.put(0b11, topic, '', frameOf(i, 20));
        collect(fast, fastGot);
      }
      await until(() => {
        collect(fast, fastGot);
        return writer.queued.records === 0 && writer.droppedReaders === 0b10;
      }, `dropped on ${topic}`);
    };
    await burst('a');
    collect(stuck, []);
    await until(() => writer.droppedReaders === 0, 'taken back');
    // Its gap record is in the ring, unread, when it is dropped again.
    await burst('b');
    collect(stuck, []);
    await until(() => writer.droppedReaders === 0, 'taken back again');
    const got: Got[] = [];
    const gaps: Missed[] = [];
    collect(stuck, got, gaps);
    expect(got.map((g) => g.topic)).toEqual(['#gap']);
    expect(gaps[0]!.records).toBe(120);
    expect([...gaps[0]!.topics!].sort()).toEqual(['a', 'b']);
  });

  it('lists no topics past 1,000 in a gap: every topic then', async () => {
    const { ring, control } = ringFor(2, 4096);
    const writer = new RingWriter(ring, control, 2, { maxQueuedBytes: 256 });
    const fast = new RingReader(ring, 0);
    const stuck = new RingReader(ring, 1);
    for (let i = 0; i < 1500; i++) {
      writer.put(0b11, `t${i}`, '', 'x');
      collect(fast, []);
    }
    await until(() => {
      collect(fast, []);
      return writer.droppedReaders === 0b10 && writer.queued.records === 0;
    }, 'dropped');
    collect(stuck, []);
    await until(() => writer.droppedReaders === 0, 'taken back');
    const gaps: Missed[] = [];
    collect(stuck, [], gaps);
    expect(gaps).toEqual([{ records: 1500, topics: null }]);
  });

  it('drops a reader that holds the ring without moving for maxHeldMs, however little is queued', async () => {
    const { ring, control } = ringFor(2, 256);
    const dropped: number[][] = [];
    const writer = new RingWriter(ring, control, 2, { maxQueuedBytes: Infinity, maxHeldMs: 100, onReadersDropped: (readers) => dropped.push(readers) });
    const fast = new RingReader(ring, 0);
    const fastGot: Got[] = [];
    for (let i = 0; i < 6; i++) {
      writer.put(0b11, 't', '', frameOf(i, 20));
      collect(fast, fastGot);
    }
    expect(writer.queued.records).toBeGreaterThan(0);
    await until(() => {
      collect(fast, fastGot);
      return fastGot.length === 6;
    }, 'the fast reader at the end');
    expect(dropped).toEqual([[1]]);
  });

  it('skips a reader marked inactive when counting free space', () => {
    const { ring, control } = ringFor(2, 256);
    const writer = new RingWriter(ring, control, 2);
    Atomics.store(new Int32Array(control), controlActive(2, 1), 0);
    const reader = new RingReader(ring, 0);
    const got: Got[] = [];
    for (let i = 0; i < 50; i++) {
      writer.put(0b11, 't', '', frameOf(i, 20));
      collect(reader, got);
    }
    expect(writer.queued.records).toBe(0);
    expect(got).toHaveLength(50);
  });

  it('refuses a record larger than half the ring', () => {
    const { ring, control } = ringFor(1, 256);
    const writer = new RingWriter(ring, control, 1);
    expect(() => writer.put(1, 't', '', 'x'.repeat(200))).toThrow(RangeError);
  });
});
