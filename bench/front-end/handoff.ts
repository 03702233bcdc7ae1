/**
 * The handoff micro-benchmark of the front-end threads benchmark: the cost of handing one
 * channel frame from the thread that has it (in Herald, a shard's answer reaching the main
 * thread) to each of N front-end threads. Variants:
 *
 * - `MessagePort, Uint8Array cloned`: postMessage(frame) to each thread; structured clone copies it.
 * - `MessagePort, ArrayBuffer transferred`: a copy per thread (a transferred buffer is gone from
 *   the sender), postMessage(buffer, [buffer]).
 * - `SAB ring, notify per frame`: the frame copied once into a SharedArrayBuffer ring
 *   (ring.ts), Atomics.notify after each; every thread reads it in place (Atomics.waitAsync).
 * - `SAB ring, notify per batch`: the same, one Atomics.notify per batch of frames, as a writer
 *   that flushes once per event-loop turn would.
 * - `ThreadedTopicFanout`: Herald's fanout (src/front-end/fanout.ts), the main thread as
 *   producer publishing a string frame (encoded once into the ring, the interest table read per
 *   publish, one doorbell per thread per turn); each thread's fanout hands a view of the ring
 *   to its local publish.
 *
 * Each round puts `batch` frames to every thread and waits until every thread has counted them;
 * rounds run for `seconds`. Figures per frame handed to one thread (a delivery).
 */
import { Worker } from 'node:worker_threads';
import { createFanoutBuffers, ThreadedTopicFanout } from '../../src/front-end/fanout.js';
import { InterestTable } from '../../src/front-end/interest.js';
import { BENCH_TOPIC, RingWriter, type HandoffSinkData, type SinkCommand, type SinkReply } from './ring.js';
import { processCpuUs, threadCpuUs } from './thread-cpu.js';

export interface HandoffOptions {
  threads: number;
  frameBytes: number;
  batch: number;
  seconds: number;
}

export interface HandoffResult {
  variant: string;
  deliveries: number;
  /** Wall time per delivery, ns. */
  wallNs: number;
  /** CPU of the whole process (sender and every receiver) per delivery, ns. */
  cpuNs: number;
  /** CPU of the sending thread per delivery, ns. */
  senderNs: number;
  /** CPU of the receiving threads per delivery, ns. */
  receiverNs: number;
}

type Put = (frame: Uint8Array) => Promise<void> | void;

interface Variant {
  name: string;
  /** Hands `batch` copies of frame to every sink. */
  round: (frame: Uint8Array, batch: number) => Promise<void> | void;
}

export async function runHandoff(options: HandoffOptions, workerFile: URL): Promise<HandoffResult[]> {
  const ring = RingWriter.create(options.threads, Math.max(1024, options.batch * 2), options.frameBytes);
  const fanoutInit = createFanoutBuffers({ threads: options.threads, maxFrameBytes: options.frameBytes });
  const sinks = await Promise.all(
    Array.from({ length: options.threads }, async (_, index) => {
      const data: HandoffSinkData = {
        role: 'sink',
        index,
        header: ring.headerBuffer,
        slots: ring.slotBuffer,
        slotCount: ring.slotCount,
        slotBytes: ring.slotBytes,
        fanout: fanoutInit,
      };
      const worker = new Worker(workerFile, { workerData: data });
      await new Promise((resolve) => worker.once('online', resolve));
      return worker;
    }),
  );
  // Every thread has registered its interest in the bench topic.
  const interest = new InterestTable(fanoutInit.interest, options.threads);
  while (interest.maskFor(BENCH_TOPIC, options.threads) !== 2 ** options.threads - 1) await new Promise((resolve) => setTimeout(resolve, 10));
  const producer = new ThreadedTopicFanout(fanoutInit, options.threads, { publish: () => {}, numSubscribers: () => 0, publishFrom: () => {} });
  const frameText = 'x'.repeat(options.frameBytes);
  const expected = sinks.map(() => 0);
  const sinkCpu = sinks.map(() => 0);

  const ringPut = async (frame: Uint8Array, notify: boolean): Promise<void> => {
    while (!ring.put(frame, notify)) await ring.room();
  };
  const putEach = (put: Put): Variant['round'] => async (frame, batch) => {
    for (let i = 0; i < batch; i++) {
      const pending = put(frame);
      if (pending) await pending;
    }
  };
  const variants: Variant[] = [
    { name: 'MessagePort, Uint8Array cloned', round: putEach((frame) => { for (const sink of sinks) sink.postMessage(frame); }) },
    {
      name: 'MessagePort, ArrayBuffer transferred',
      round: putEach((frame) => {
        for (const sink of sinks) {
          const copy = frame.slice().buffer;
          sink.postMessage(copy, [copy]);
        }
      }),
    },
    { name: 'SAB ring, notify per frame', round: putEach((frame) => ringPut(frame, true)) },
    {
      name: 'SAB ring, notify per batch',
      round: async (frame, batch) => {
        for (let i = 0; i < batch; i++) await ringPut(frame, false);
        ring.notify();
      },
    },
    {
      name: 'ThreadedTopicFanout',
      round: (_frame, batch) => {
        for (let i = 0; i < batch; i++) producer.publish(BENCH_TOPIC, frameText);
      },
    },
  ];

  /** One round: tell each sink its new total, hand the frames, wait for every sink. */
  const round = async (variant: Variant, frame: Uint8Array): Promise<void> => {
    const replies = sinks.map(
      (sink, i) =>
        new Promise<void>((resolve) => {
          sink.once('message', (reply: SinkReply) => {
            sinkCpu[i] = reply.cpuUs;
            resolve();
          });
        }),
    );
    sinks.forEach((sink, i) => {
      expected[i]! += options.batch;
      const command: SinkCommand = { type: 'expect', total: expected[i]! };
      sink.postMessage(command);
    });
    await variant.round(frame, options.batch);
    await Promise.all(replies);
  };

  const frame = new Uint8Array(options.frameBytes).fill(0x78);
  const results: HandoffResult[] = [];
  for (const variant of variants) {
    await round(variant, frame); // warm-up
    const sinkStart = sinkCpu.reduce((a, b) => a + b, 0);
    const start = process.hrtime.bigint();
    const cpuStart = processCpuUs();
    const senderStart = threadCpuUs();
    let rounds = 0;
    while (Number(process.hrtime.bigint() - start) < options.seconds * 1e9) {
      await round(variant, frame);
      rounds++;
    }
    const wallNs = Number(process.hrtime.bigint() - start);
    const deliveries = rounds * options.batch * options.threads;
    results.push({
      variant: variant.name,
      deliveries,
      wallNs: wallNs / deliveries,
      cpuNs: ((processCpuUs() - cpuStart) * 1000) / deliveries,
      senderNs: ((threadCpuUs() - senderStart) * 1000) / deliveries,
      receiverNs: ((sinkCpu.reduce((a, b) => a + b, 0) - sinkStart) * 1000) / deliveries,
    });
  }
  ring.stop();
  producer.close();
  await Promise.all(
    sinks.map((sink) => {
      const exited = new Promise((resolve) => sink.once('exit', resolve));
      const command: SinkCommand = { type: 'exit' };
      sink.postMessage(command);
      return exited;
    }),
  );
  return results;
}
