/**
 * What every main-side requester of the shards (ShardPool over Piscina, PortShardRequester
 * over a front end's MessagePorts) does alike with a request's outcome: reading a ShardReply
 * into its value or its HeraldError, the errors a shard that does not answer yields, and the
 * bound on requests waiting per shard. Requesters differ only in how bytes reach the worker.
 */
import { HeraldError, ERROR_CATALOGUE, type ErrorCode } from '../errors.js';
import { log } from '../log.js';
import type { ShardReply } from './messages.js';

/** Requests a shard's queue holds beyond what its worker takes at once; more fail at once. */
export const DEFAULT_MAX_QUEUE_PER_SHARD = 10_000;
/** At most one "queue full" warning per shard per this many ms. */
const QUEUE_FULL_LOG_INTERVAL_MS = 1_000;

/** The answer a reply carries; an error reply throws its HeraldError (INTERNAL for a code outside the catalogue). */
export function replyValue(reply: ShardReply): unknown {
  if (reply.ok) return reply.value;
  if (reply.code in ERROR_CATALOGUE) throw new HeraldError(reply.code as ErrorCode, reply.message);
  throw new HeraldError('INTERNAL', reply.message);
}

/** The shard did not answer within the request's timeout. */
export function timedOut(shard: number, timeoutMs: number): HeraldError {
  return new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} did not answer within ${timeoutMs} ms`);
}

/** The shard's worker died while it held the request. */
export function workerStopped(shard: number): HeraldError {
  return new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} stopped while handling the request`);
}

/** Refuses a request beyond a shard's queue bound, warning at most once a second per shard. */
export class QueueFullRefusal {
  /** Per shard: when the last warning was logged (epoch ms). */
  private readonly loggedAt: number[];

  constructor(shardCount: number) {
    this.loggedAt = new Array<number>(shardCount).fill(0);
  }

  error(shard: number, inFlight: number): HeraldError {
    const now = Date.now();
    if (now - (this.loggedAt[shard] ?? 0) >= QUEUE_FULL_LOG_INTERVAL_MS) {
      this.loggedAt[shard] = now;
      log.warn('shard queue full: requests refused until it drains', { shard, inFlight });
    }
    return new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} is overloaded: too many requests waiting`);
  }
}
