/** Messages between the front-end threads benchmark's orchestrator, its server threads and its load processes. */

/** How a server thread gets its connections. */
export type AcceptMode = 'reuseport' | 'acceptor';

/** workerData of a server thread. */
export interface ServerThreadData {
  role: 'server';
  index: number;
  mode: AcceptMode;
  host: string;
  /** The shared port (reuseport); unused with the acceptor. */
  port: number;
  /** Size of the frame each publish sends, bytes. */
  frameBytes: number;
}

/** Orchestrator → server thread. */
export type ServerCommand =
  | { type: 'count' }
  | { type: 'publish'; messages: number }
  | { type: 'close' };

/** Server thread → orchestrator. */
export type ServerReply =
  | { type: 'ready'; listening: boolean; descriptor?: number }
  | { type: 'count'; open: number; cpuUs: number }
  | { type: 'published' };

/** Orchestrator → load process. */
export type LoadCommand =
  | { type: 'connect'; url: string; count: number; concurrency: number }
  | { type: 'expect'; frames: number }
  | { type: 'cpu' }
  | { type: 'close' };

/** Load process → orchestrator. */
export type LoadReply =
  | { type: 'connected'; open: number; failed: number }
  | { type: 'reached'; frames: number }
  | { type: 'cpu'; cpuUs: number };
