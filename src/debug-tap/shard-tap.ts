/**
 * The shard workers' end of the debug tap: events of watched apps that happen on a shard (a
 * webhook attempt), sent to the main thread's DebugHub over a BroadcastChannel (no shard
 * request, no main-thread round trip).
 *
 * The main thread posts the list of watched apps on the `watch` channel whenever it changes;
 * a worker says `hello` when it starts so that a replaced worker learns the current list. In
 * the main thread (unit tests of the outbox) this module does nothing.
 */
import { BroadcastChannel, isMainThread, workerData } from 'node:worker_threads';
import type { DebugEvent } from './tap.js';

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

/** True while a dashboard watches the app (always false in the main thread): only then is an event worth building. */
export function shardWatching(appId: string): boolean {
  return watched.size !== 0 && watched.has(appId) && toMain !== undefined;
}

/** Sends an event of a watched app to the main thread's DebugHub (which drops it if the app is no longer watched). */
export function shardTapEvent(appId: string, event: DebugEvent): void {
  const message: ShardTapMessage = { type: 'event', appId, event };
  toMain?.postMessage(message);
}
