/**
 * A receiving thread of the handoff micro-benchmark (handoff.ts): counts the frames that reach
 * it, by MessagePort (a cloned Uint8Array or a transferred ArrayBuffer) or from the shared ring,
 * reading each frame's first byte as a front-end thread would before handing a view of it to
 * uWS's publish. Tells the main thread when the count it was told to expect is reached.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ThreadedTopicFanout } from '../../src/front-end/fanout.js';
import { BENCH_TOPIC, RING_READ, RING_STOP, RING_WRITE, waitAsync, type HandoffSinkData, type SinkCommand, type SinkReply } from './ring.js';
import { threadCpuUs } from './thread-cpu.js';

const port = parentPort!;
const data = workerData as HandoffSinkData;
const header = new Int32Array(data.header);
const lengths = new Int32Array(data.slots);
const bytes = new Uint8Array(data.slots);
let received = 0;
let target = Infinity;
/** Sum of first bytes, so the read cannot be optimised away. */
let touched = 0;

function count(): void {
  received++;
  if (received === target) done();
}

function done(): void {
  const message: SinkReply = { type: 'done', received, cpuUs: threadCpuUs(), touched };
  port.postMessage(message);
}

/** Drains the ring whenever the writer moves on; stops when RING_STOP is set. */
async function readRing(): Promise<void> {
  const slotInts = data.slotBytes / 4;
  let read = 0;
  for (;;) {
    const write = Atomics.load(header, RING_WRITE);
    while (read !== write) {
      const slot = read % data.slotCount;
      const length = lengths[slot * slotInts]!;
      const frame = bytes.subarray(slot * data.slotBytes + 4, slot * data.slotBytes + 4 + length);
      touched += frame[0]!;
      read++;
      count();
    }
    Atomics.store(header, RING_READ + data.index, read);
    Atomics.notify(header, RING_READ + data.index);
    if (Atomics.load(header, RING_STOP) === 1) return;
    const wait = waitAsync(header, RING_WRITE, write);
    if (wait.async) await wait.value;
  }
}

port.on('message', (message: SinkCommand | Uint8Array | ArrayBuffer) => {
  if (message instanceof Uint8Array) {
    touched += message[0]!;
    count();
  } else if (message instanceof ArrayBuffer) {
    touched += new Uint8Array(message)[0]!;
    count();
  } else if (message.type === 'expect') {
    target = message.total;
    if (received >= target) done();
  } else {
    fanout.close();
    port.close();
  }
});

void readRing();

/** The production path: frames published to this thread's (counting) topic fanout. */
const fanout = new ThreadedTopicFanout(data.fanout, data.index, {
  publish: (_topic, message) => {
    touched += (message as Uint8Array)[0]!;
    count();
  },
  numSubscribers: () => 1,
  publishFrom: () => {},
});
fanout.interest!.add(BENCH_TOPIC);
