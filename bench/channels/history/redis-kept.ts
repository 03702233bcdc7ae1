/**
 * Channel history in a cluster (src/channels/adapter/redis/history-store.ts): Redis memory per
 * kept event (used_memory growth after keeping N events across many channels, per event, next
 * to the bytes the event counts against maxHistoryBytes), and the append script's cost in Redis
 * (its CPU per call, from INFO commandstats). Starts its own redis-server on a free port. Run:
 * `npm run build --silent && node dist/bench/channels/history/redis-kept.js`
 */
import { Redis } from 'ioredis';
import { RedisHistory, type ClusterHistoryBounds } from '../../../src/channels/adapter/redis/history-store.js';
import { cacheEntryBytes } from '../../../src/channels/state/channel-store.js';
import { keptEvent } from '../../../src/channels/frames.js';
import { RedisServer } from '../../../test/helpers/redis-server.js';

const EVENTS = 100_000;
const CHANNELS = 1_000;
/** Appends in flight at once (pipelined on one connection, as a node's are). */
const IN_FLIGHT = 200;

const server = await new RedisServer().start();
const rows: Record<string, string | number>[] = [];
try {
  for (const dataBytes of [100, 1000]) {
    const redis = new Redis(server.url, { enableAutoPipelining: true });
    await redis.flushall();
    const history = new RedisHistory(redis, 'bench:');
    const bounds: ClusterHistoryBounds = { maxEvents: EVENTS, ttlSeconds: 3600, maxBytes: Number.MAX_SAFE_INTEGER };
    const data = JSON.stringify({ text: 'x'.repeat(dataBytes - 12) });
    const memory = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
    await redis.config('RESETSTAT');
    const before = await memory();
    const started = process.hrtime.bigint();
    for (let i = 0; i < EVENTS; i += IN_FLIGHT) {
      await Promise.all(
        Array.from({ length: Math.min(IN_FLIGHT, EVENTS - i) }, (_, j) => {
          const channel = `history-room-${(i + j) % CHANNELS}`;
          const own = `${data.slice(0, -8)}${String(i + j).padStart(7, '0')}}`;
          const head = keptEvent('new-message', channel, own, '').slice(0, -2);
          return history.append({ appId: 'bench-app', channel, event: 'new-message', data: own }, bounds, 'bench:msg:bench-app:' + channel, head);
        }),
      );
    }
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
    // The same frames published plainly (a channel without history), for reference.
    for (let i = 0; i < EVENTS / 10; i += IN_FLIGHT) {
      await Promise.all(Array.from({ length: IN_FLIGHT }, (_, j) => redis.publish(`bench:msg:bench-app:history-room-${(i + j) % CHANNELS}`, `node\n\n${keptEvent('new-message', 'history-room', data, '')}`)));
    }
    const perEvent = ((await memory()) - before) / EVENTS;
    const stats = await redis.info('commandstats');
    const evalsha = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats);
    const usecPerCall = evalsha ? Number(evalsha[2]) / Number(evalsha[1]) : NaN;
    const counted = cacheEntryBytes('history-room-500', 'new-message', data);
    rows.push({
      'data bytes': data.length,
      events: EVENTS,
      channels: CHANNELS,
      'Redis memory per kept event (B)': Math.round(perEvent),
      'counted bytes': counted,
      ratio: (perEvent / counted).toFixed(2),
      'Redis CPU per append (µs)': usecPerCall.toFixed(1),
      'Redis CPU per plain PUBLISH (µs)': (/cmdstat_publish:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)?.[1] ?? '?'),
      'appends/s (one connection)': Math.round(EVENTS / (wallMs / 1000)),
    });
    redis.disconnect();
  }
} finally {
  await server.stop();
}
console.table(rows);
