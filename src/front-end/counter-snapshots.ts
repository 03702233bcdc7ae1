/**
 * The front-end threads' counters for main's /metrics: main asks each thread over its port
 * when scraped, and each thread answers with `snapshotNodeCounters()`. `counterGatherer` is
 * HeraldMetrics' `gather` option.
 */
import type { MessagePort } from 'node:worker_threads';
import { snapshotNodeCounters, type NodeCountersSnapshot } from '../metrics/counters-snapshot.js';

/** How long a scrape waits for a thread's counters, ms (as long as it waits for the shards). */
export const COUNTERS_TIMEOUT_MS = 2000;

export type CountersMessage =
  | { readonly type: 'counters.ask'; readonly id: number }
  | { readonly type: 'counters.snapshot'; readonly id: number; readonly snapshot: NodeCountersSnapshot };

/** Thread side: answers main's asks on `port` with this thread's counters. Returns the function that stops answering. */
export function answerCounterSnapshots(port: MessagePort): () => void {
  const onMessage = (message: CountersMessage | null): void => {
    if (message?.type !== 'counters.ask') return;
    port.postMessage({ type: 'counters.snapshot', id: message.id, snapshot: snapshotNodeCounters() } satisfies CountersMessage);
  };
  port.on('message', onMessage);
  return () => {
    port.off('message', onMessage);
  };
}

/**
 * Main side: asks every thread's port at once and resolves with the snapshots that came
 * within `timeoutMs`. A thread that does not answer is left out of that scrape (its counts
 * read lower once, and Prometheus takes a counter that went down for a reset), rather than
 * holding the scrape.
 */
export function counterGatherer(ports: () => readonly MessagePort[], timeoutMs = COUNTERS_TIMEOUT_MS): () => Promise<NodeCountersSnapshot[]> {
  let nextId = 0;
  const ask = (port: MessagePort): Promise<NodeCountersSnapshot | undefined> =>
    new Promise((resolve) => {
      const id = nextId++;
      const done = (snapshot: NodeCountersSnapshot | undefined): void => {
        clearTimeout(timer);
        port.off('message', onMessage);
        port.off('close', onClose);
        resolve(snapshot);
      };
      const onMessage = (message: CountersMessage | null): void => {
        if (message?.type === 'counters.snapshot' && message.id === id) done(message.snapshot);
      };
      const onClose = (): void => done(undefined);
      const timer = setTimeout(() => done(undefined), timeoutMs);
      port.on('message', onMessage);
      port.on('close', onClose);
      port.postMessage({ type: 'counters.ask', id } satisfies CountersMessage);
    });
  return async () => (await Promise.all(ports().map(ask))).filter((s): s is NodeCountersSnapshot => s !== undefined);
}
