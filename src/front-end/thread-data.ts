/** What the main thread hands a front-end thread when it starts it (its workerData). */
import type { MessagePort } from 'node:worker_threads';
import type { HeraldConfig } from '../config/schema.js';
import type { SharedCountersInit } from './shared-counters.js';
import type { FanoutInit } from './fanout.js';
import type { RelaySpec } from './route-relay.js';
import type { ThreadClusterInit } from '../channels/adapter/open-adapter.js';

export interface FrontEndThreadData {
  /** This thread's index, 0 to threads − 1 (socket ids carry it). */
  thread: number;
  threads: number;
  /** The running config, stored tenants included. */
  config: HeraldConfig;
  /** Absolute data dir: names the debug tap's channels (debug-tap/shard-tap.ts). */
  dataDir: string;
  /** The port every thread listens on (chosen by the main thread when the config says 0). */
  port: number;
  installSecret: string;
  /** One port per shard worker, by shard index. */
  shardPorts: MessagePort[];
  counters: SharedCountersInit;
  /** Each app's slot in the counters (app id, slot). */
  slots: [string, number][];
  fanout: FanoutInit;
  /** The control plane's routes (admin API, /metrics) and the port to the main thread that serves them. */
  relaySpecs: RelaySpec[];
  relayPort: MessagePort;
  /** The admin API's live stream is served (relayed on `relayPort`). */
  adminStream: boolean;
  /** A cluster node: the thread's share of it (thread-node.ts). */
  cluster?: ThreadClusterInit;
}
