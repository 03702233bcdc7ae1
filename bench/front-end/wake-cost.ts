/**
 * `npm run bench:wake-cost [-- [--wakes 3000] [--gap-ms 1] [--rounds 2]]`
 *
 * What waking an idle thread costs the process, in CPU: the price a front-end thread pays for
 * each frame another thread hands it while it sleeps (one wake per crossed unicast trigger at
 * moderate rates). The main thread ticks every `gap-ms` (a timer) `wakes` times:
 *  - `timer only` (the reference): the tick alone, no other thread woken: a thread's own
 *    sleep and wake;
 *  - `Atomics.waitAsync`: each tick also notifies a worker waiting as src/front-end/fanout.ts's
 *    reading loop does;
 *  - `MessagePort`: each tick posts a message to a worker instead.
 * CPU is the whole process's (/proc/self/stat, 10 ms ticks: keep `wakes × gap-ms` in seconds).
 * The variants run in turn, `rounds` times; the table gives each run and the extra per wake over
 * the reference of the same round. Figures, never pass/fail.
 */
import { MessageChannel, Worker, isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { formatTable, machineInfo } from '../fanout/report.js';
import { processCpuUs } from '../proc-stats.js';
import { waitAsync } from '../../src/front-end/ring.js';

type Mode = 'timer only' | 'Atomics.waitAsync' | 'MessagePort';
const MODES: readonly Mode[] = ['timer only', 'Atomics.waitAsync', 'MessagePort'];

interface SideData {
  bell: SharedArrayBuffer;
  port: MessagePort;
  mode: Mode;
}

/** The woken thread: counts its wakes; answers the count when asked. */
function side(): void {
  const { bell, port, mode } = workerData as SideData;
  const cells = new Int32Array(bell);
  let wakes = 0;
  parentPort!.on('message', () => parentPort!.postMessage(wakes));
  if (mode === 'Atomics.waitAsync') {
    void (async () => {
      let seen = 0;
      for (;;) {
        const pending = waitAsync(cells, 0, seen);
        if (pending.async) await pending.value;
        seen = Atomics.load(cells, 0);
        wakes++;
      }
    })();
  } else if (mode === 'MessagePort') {
    port.on('message', () => {
      wakes++;
    });
  }
  parentPort!.postMessage('ready');
}

async function measure(mode: Mode, wakes: number, gapMs: number): Promise<{ cpuPerWakeUs: number; woken: number }> {
  const bell = new SharedArrayBuffer(4);
  const cells = new Int32Array(bell);
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(new URL(import.meta.url), { workerData: { bell, port: port2, mode } satisfies SideData, transferList: [port2] });
  await new Promise((resolve) => worker.once('message', resolve));
  const before = processCpuUs(process.pid);
  for (let i = 0; i < wakes; i++) {
    if (mode === 'Atomics.waitAsync') {
      Atomics.add(cells, 0, 1);
      Atomics.notify(cells, 0);
    } else if (mode === 'MessagePort') {
      port1.postMessage(i);
    }
    await sleep(gapMs);
  }
  const cpuUs = processCpuUs(process.pid) - before;
  worker.postMessage('count');
  const woken = await new Promise<number>((resolve) => worker.once('message', resolve));
  await worker.terminate();
  port1.close();
  return { cpuPerWakeUs: cpuUs / wakes, woken };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      wakes: { type: 'string', default: '3000' },
      'gap-ms': { type: 'string', default: '1' },
      rounds: { type: 'string', default: '2' },
    },
  });
  const wakes = Math.max(100, Number(values.wakes));
  const gapMs = Math.max(0, Number(values['gap-ms']));
  const rounds = Math.max(1, Number(values.rounds));
  const machine = machineInfo();
  console.log(`wake cost: ${machine.nproc} cores (${machine.cpuModel}), node ${machine.node}, load ${machine.loadAverageAtStart}; ${wakes} ticks ${gapMs} ms apart per run`);
  const rows: string[][] = [['round', 'variant', 'threads woken', 'process CPU per tick, µs', 'over the timer only, µs']];
  for (let round = 1; round <= rounds; round++) {
    let reference = 0;
    for (const mode of MODES) {
      const { cpuPerWakeUs, woken } = await measure(mode, wakes, gapMs);
      if (mode === 'timer only') reference = cpuPerWakeUs;
      rows.push([String(round), mode, mode === 'timer only' ? '-' : String(woken), cpuPerWakeUs.toFixed(1), mode === 'timer only' ? '' : (cpuPerWakeUs - reference).toFixed(1)]);
    }
  }
  console.log(formatTable(rows, 2));
}

if (isMainThread) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench:wake-cost failed: ${String((err as Error)?.stack ?? err)}\n`);
      process.exit(1);
    },
  );
} else {
  side();
}
