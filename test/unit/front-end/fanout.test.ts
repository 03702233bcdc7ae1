/**
 * ThreadedTopicFanout's wiring with channel delivery, two front-end threads' fanouts in one
 * thread: the local side of each is a recorder standing in for its uWS app.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RecognizedString } from 'uWebSockets.js';
import type { PublishingSocket, TopicFanout } from '../../../src/http/topic-fanout.js';
import { attachFanoutThread, createFanoutBuffers, detachFanoutThread, ThreadedTopicFanout } from '../../../src/front-end/fanout.js';
import { countRemoteDelivery } from '../../../src/front-end/delivery-count.js';
import { deliverToTopic } from '../../../src/channels/adapter/topic-delivery.js';
import { SocketRegistry } from '../../../src/channels/socket-registry.js';
import { appCounters } from '../../../src/metrics/node-counters.js';
import { SessionTopics } from '../../../src/channels/http-fallback/topics.js';
import { SessionSocket, type SessionHost } from '../../../src/channels/http-fallback/session.js';
import { InterestTable } from '../../../src/front-end/interest.js';
import { topicFor, watchTopicFor } from '../../../src/channels/frames.js';
import { until } from '../../helpers/wait.js';

class RecordingApp implements TopicFanout {
  readonly sent: { topic: string; frame: string; from: PublishingSocket | null }[] = [];
  subscribers = 0;
  publish(topic: RecognizedString, message: RecognizedString): void {
    this.sent.push({ topic: String(topic), frame: Buffer.from(message as Uint8Array).toString('utf8'), from: null });
  }
  numSubscribers(): number {
    return this.subscribers;
  }
  publishFrom(ws: PublishingSocket, topic: RecognizedString, message: RecognizedString): void {
    this.sent.push({ topic: String(topic), frame: Buffer.from(message as Uint8Array).toString('utf8'), from: ws });
  }
}

const fanouts: ThreadedTopicFanout[] = [];
afterEach(async () => {
  for (const f of fanouts.splice(0)) {
    f.close();
    await f.stopped;
  }
});

describe('ThreadedTopicFanout', () => {
  it('delivers frames of several producers in the order they were written, whatever their rings', async () => {
    const init = createFanoutBuffers({ threads: 3, ringBytes: 4096, maxFrameBytes: 100 });
    const reader = new RecordingApp();
    const t0 = new ThreadedTopicFanout(init, 0, new RecordingApp());
    const t1 = new ThreadedTopicFanout(init, 1, new RecordingApp());
    const t2 = new ThreadedTopicFanout(init, 2, reader);
    fanouts.push(t0, t1, t2);
    const topic = topicFor('app-o', 'orders');
    t2.interest!.add(topic);
    // Written in one turn, before thread 2 reads: the later ring first, then the earlier one, then the later again.
    t1.publish(topic, 'first');
    t0.publish(topic, 'second');
    t1.publish(topic, 'third');
    t0.publish(topic, 'fourth');
    await until(() => reader.sent.length === 4, 'thread 2 delivered four frames');
    expect(reader.sent.map((s) => s.frame)).toEqual(['first', 'second', 'third', 'fourth']);
  });

  it('excludes a socket of another thread when channel delivery names it, and that thread counts its deliveries for the app', async () => {
    const init = createFanoutBuffers({ threads: 2, ringBytes: 4096, maxFrameBytes: 100 });
    const app0 = new RecordingApp();
    const app1 = new RecordingApp();
    const sender: PublishingSocket = { publish: () => true };
    const t0 = new ThreadedTopicFanout(init, 0, app0);
    const t1 = new ThreadedTopicFanout(init, 1, app1, {
      lookupSocket: (id) => (id === '65.7' ? sender : undefined),
      onDelivered: countRemoteDelivery,
    });
    fanouts.push(t0, t1);
    const topic = topicFor('app-x', 'chat');
    t1.interest!.add(topic);
    t1.interest!.add(topic);
    app1.subscribers = 2;
    const before = appCounters('app-x').wsMessagesSent;

    deliverToTopic(t0, new SocketRegistry(), 'app-x', 'chat', '{"event":"e"}', '65.7');
    await until(() => app1.sent.length === 1, 'thread 1 delivered');
    expect(app1.sent[0]).toEqual({ topic, frame: '{"event":"e"}', from: sender });
    expect(app0.sent).toEqual([{ topic, frame: '{"event":"e"}', from: null }]);
    // Thread 1 sent it to its two subscribers but the sender.
    expect(appCounters('app-x').wsMessagesSent - before).toBe(1);
  });

  it('counts channel topics for their app, never watchlist topics', () => {
    const before = appCounters('a b').wsMessagesSent;
    countRemoteDelivery(topicFor('a b', 'c:d'), 3);
    countRemoteDelivery(watchTopicFor('a b', 'u'), 5);
    expect(appCounters('a b').wsMessagesSent - before).toBe(3);
  });

  it('sessions tell the interest table of their topics, ending included', () => {
    const init = createFanoutBuffers({ threads: 2, ringBytes: 4096, maxFrameBytes: 100 });
    const t1 = new ThreadedTopicFanout(init, 1, new RecordingApp());
    fanouts.push(t1);
    const topics = new SessionTopics(t1, t1.interest!);
    const host: SessionHost = {
      schedule: () => {},
      ended: () => {},
      drained: () => {},
      subscribe: (s, t) => topics.add(s, t),
      unsubscribe: (s, t) => topics.remove(s, t),
      publish: () => true,
      hardCapBytes: 1 << 20,
    };
    const a = new SessionSocket(host, 'k/1/a', '127.0.0.1', Date.now());
    const b = new SessionSocket(host, 'k/1/b', '127.0.0.1', Date.now());
    const table = new InterestTable(init.interest, 2);
    a.subscribe('app:ch');
    a.subscribe('app:ch');
    b.subscribe('app:ch');
    expect(table.maskFor('app:ch', 0)).toBe(0b10);
    a.unsubscribe('app:ch');
    expect(table.maskFor('app:ch', 0)).toBe(0b10);
    topics.removeAll(b);
    expect(table.maskFor('app:ch', 0)).toBe(0);
  });

  it('tells a dropped thread what it missed, from which producer, before the frames after the gap', async () => {
    const init = createFanoutBuffers({ threads: 1, ringBytes: 4096, maxFrameBytes: 100 });
    const producer = new ThreadedTopicFanout(init, 1, new RecordingApp(), { maxQueuedBytes: 4096 });
    const app0 = new RecordingApp();
    const missed: { producer: number; records: number; topics: string[] | null; sentBefore: number }[] = [];
    const reader = new ThreadedTopicFanout(init, 0, app0, {
      onMissed: (from, m) => missed.push({ producer: from, records: m.records, topics: m.topics && [...m.topics].sort(), sentBefore: app0.sent.length }),
    });
    fanouts.push(producer, reader);
    reader.interest!.add('app:a');
    reader.interest!.add('app:b');
    // In one turn, more than the ring (32 KiB) and the bound: thread 0 cannot read meanwhile.
    for (let i = 0; i < 400; i++) producer.publish(i % 2 === 0 ? 'app:a' : 'app:b', `${i}:${'x'.repeat(90)}`);
    await until(() => missed.length === 1, 'onMissed');
    producer.publish('app:a', 'after');
    await until(() => app0.sent.at(-1)?.frame === 'after', 'the frame after the gap');
    const m = missed[0]!;
    expect(m.producer).toBe(1);
    expect(m.topics).toEqual(['app:a', 'app:b']);
    // What it got before the gap and what the gap counts are the 400 frames, in order.
    expect(m.sentBefore + m.records).toBe(400);
    expect(app0.sent.slice(0, m.sentBefore).map((x) => Number(x.frame.split(':')[0]))).toEqual([...Array(m.sentBefore).keys()]);
  });

  it('drops a thread that holds the ring, stops addressing a thread that is gone, and a replacement reads from then on', async () => {
    const init = createFanoutBuffers({ threads: 2, ringBytes: 4096, maxFrameBytes: 100 });
    expect(init.ringBytes).toBe(32 * 1024);
    const behind: number[][] = [];
    const producer = new ThreadedTopicFanout(init, 2, new RecordingApp(), { onReadersDropped: (threads) => behind.push(threads) });
    // Thread 0 reads as usual.
    fanouts.push(producer, new ThreadedTopicFanout(init, 0, new RecordingApp()));
    // Thread 1 registered its interest and stopped reading (stuck or dead).
    const table = new InterestTable(init.interest, 2);
    table.adjust('app:ch', 1, 1);
    const frame = 'x'.repeat(90);
    // More than the ring holds (32 KiB).
    for (let i = 0; i < 400; i++) producer.publish('app:ch', frame);
    await until(() => behind.length === 1, 'onReadersDropped');
    expect(behind[0]).toContain(1);

    detachFanoutThread(init, 1);
    expect(table.maskFor('app:ch', 2)).toBe(0);
    // Nothing is addressed to thread 1 any more, nor does it hold the ring: a publish is written once thread 0 has read on.
    const written = new Int32Array(init.rings[2]!.header)[0]!;
    table.adjust('app:ch', 0, 1);
    producer.publish('app:ch', 'to thread 0');
    await until(() => new Int32Array(init.rings[2]!.header)[0]! > written, 'the publish written');
    table.adjust('app:ch', 0, -1);

    attachFanoutThread(init, 1);
    const app1 = new RecordingApp();
    const replacement = new ThreadedTopicFanout(init, 1, app1);
    fanouts.push(replacement);
    replacement.interest!.add('app:ch');
    producer.publish('app:ch', 'after');
    await until(() => app1.sent.length === 1, 'the replacement got the new frame');
    expect(app1.sent[0]!.frame).toBe('after');
  });
});
