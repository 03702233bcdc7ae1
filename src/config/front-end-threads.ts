/**
 * `frontEndThreads`: how many threads serve the port. The default follows the host: one thread
 * per 4 CPUs (1 on up to 7 CPUs, 2 on 8, 4 on 16, 16 on 64 and more), and 1 off Linux, where
 * SO_REUSEPORT does not spread connections over the listeners. The rest of the CPUs are left to
 * the shards (default CPUs − 1), which compute what the front end sends.
 */
import { availableParallelism } from 'node:os';
import { MAX_FANOUT_THREADS } from '../front-end/fanout.js';

/** The default for a host with `cpus` CPUs on `platform`. */
export function defaultFrontEndThreads(cpus: number = availableParallelism(), platform: NodeJS.Platform = process.platform): number {
  if (platform !== 'linux') return 1;
  return Math.min(16, Math.max(1, Math.floor(cpus / 4)));
}

/**
 * The most threads the host can use: its CPUs (at least 2, so the threaded front end can run on
 * any host), never more than 32 (a frame's destination threads are one 32-bit mask).
 */
export function maxFrontEndThreads(cpus: number = availableParallelism()): number {
  return Math.min(MAX_FANOUT_THREADS, Math.max(2, cpus));
}

/**
 * The configured value checked, or the default. A cluster node's default is 1 thread (nodes
 * scale a cluster out); it runs several when set (channels/adapter/redis/thread-host.ts).
 */
export function checkFrontEndThreads(configured: number | undefined, cluster: boolean, fail: (field: string, message: string) => never): number {
  if (configured === undefined) return cluster ? 1 : defaultFrontEndThreads();
  const max = maxFrontEndThreads();
  if (configured > max) fail('frontEndThreads', `${configured} is more than this host can use (at most ${max}: its CPUs, and 32)`);
  return configured;
}
