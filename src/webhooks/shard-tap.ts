/**
 * The shard workers' end of the debug tap: webhook attempts of watched apps, sent to the main
 * thread's DebugHub over a BroadcastChannel (no shard request, no main-thread round trip).
 *
 * The main thread posts the list of watched apps on the `watch` channel whenever it changes;
 * a worker says `hello` when it starts so that a replaced worker learns the current list. In
 * the main thread (unit tests of the outbox) this module does nothing.
 */
import { BroadcastChannel, isMainThread, workerData } from 'node:worker_threads';
import type { DeliveryResult } from './http-sender.js';
import { redactUrl } from './http-sender.js';
import type { OutboxEntry, WebhookTarget } from './outbox-store.js';
import type { DebugEvent } from '../admin/tap.js';

/** main → shards: the apps a dashboard watches now. */
export interface WatchMessage {
  apps: string[];
}

/** shards → main. */
export type ShardTapMessage = { type: 'hello' } | { type: 'event'; appId: string; event: DebugEvent };

/** Channel names, per data dir (one server per data dir). */
export function shardTapChannelNames(dataDir: string): { watch: string; events: string } {
  return { watch: `herald:debug:watch:${dataDir}`, events: `herald:debug:events:${dataDir}` };
}

let watched: ReadonlySet<string> = new Set();
let toMain: BroadcastChannel | undefined;

if (!isMainThread && typeof (workerData as { dataDir?: unknown })?.dataDir === 'string') {
  const names = shardTapChannelNames((workerData as { dataDir: string }).dataDir);
  const fromMain = new BroadcastChannel(names.watch);
  fromMain.onmessage = (message: unknown) => {
    watched = new Set((message as { data: WatchMessage }).data.apps);
  };
  fromMain.unref();
  toMain = new BroadcastChannel(names.events);
  toMain.unref();
  const hello: ShardTapMessage = { type: 'hello' };
  toMain.postMessage(hello);
}

/** A channel webhook request finished (delivered or failed): shown when its app is watched. */
export function tapWebhookAttempt(target: WebhookTarget, batch: readonly OutboxEntry[], result: DeliveryResult): void {
  if (watched.size === 0 || target.kind !== 'channel' || !watched.has(target.appId) || !toMain) return;
  const event: DebugEvent = {
    kind: 'webhook',
    url: redactUrl(target.url),
    events: batch.map((entry) => String(entry.event?.name ?? '?')),
    ok: result.ok,
  };
  if (result.status !== undefined) event.status = result.status;
  if (!result.ok) event.error = result.error;
  const message: ShardTapMessage = { type: 'event', appId: target.appId, event };
  toMain.postMessage(message);
}
