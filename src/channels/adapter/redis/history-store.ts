/**
 * Channel history in a cluster: the kept events of every history channel, in Redis, shared by
 * all nodes. Each change is one Lua script, so that every node sees one sequence per channel.
 *
 * Keys (beside the adapter's, under the same prefix; `<cid>` is `<appId>:<channel>`):
 * - `hist:s:<cid>`: a stream of the channel's kept events, oldest first; entry id
 *   `<generation>-<sequence>` (the serial's parts, history/serial.ts), fields e (event),
 *   d (data), t (publishedAt, Redis ms), b (bytes counted), u (user id, presence client events),
 *   x (the socket it is not sent to: a client event's sender, a trigger's socket_id; none in
 *   entries written before it was kept, which go to every socket);
 * - `hist:m:<cid>`: the channel's generation and last sequence given (g, s), kept for
 *   max(1 h, ttlSeconds) after its last event, so that a client whose last serial is the
 *   channel's last still recovers once every event has expired (started with sequence 0 by a
 *   node's point read when the channel has none, history-catch-up.ts);
 * - `hist:b:<appId>`: the bytes of the app's kept events (channel name + event name + data,
 *   UTF-8, as the cache counts), the whole of maxHistoryBytes for the cluster;
 * - `hist:o:<appId>`: the app's channels with kept events, scored by their oldest one's time
 *   (the byte bound evicts the app's oldest first; the prune finds expired ones);
 * - `hist:c:<appId>`: the app's channels with a generation, scored by their last event's time
 *   (the prune forgets quiet ones, an app removal all).
 *
 * The append script gives the serial (the channel's next sequence), keeps the event within the
 * bounds and publishes its frame to the channel's pub/sub topic, in one step: the serial order
 * is the order frames reach every node. A read can publish a mark to one node's control topic
 * in the same step (history-seam.ts): events before the mark are in the read, those after it
 * are not.
 */
import type { Redis } from 'ioredis';
import { cacheEntryBytes } from '../../state/channel-store.js';
import { parseSerial } from '../../history/serial.js';
import type { HistoryRead, KeptEnvelope, KeptEvent } from '../../messages.js';
import { whenAvailable } from '../../../cluster/connection.js';
import { LUA_PREFIX_AND_CLOCK, LuaScripts } from '../../../cluster/lua-scripts.js';

/** The envelope origin of history frames: every node delivers them, the publishing one included. */
export const HISTORY_ORIGIN = '*';

/** How long a channel whose events all went stays known (as history-store.ts on a shard), ms. */
const EMPTY_CHANNEL_KEPT_MS = 60 * 60 * 1000;
/** Channels a prune looks at per app and call. */
const PRUNE_BATCH = 100;
/** Channels an app removal drops per script call. */
const FORGET_BATCH = 200;

/** An app's history bounds for the whole cluster. */
export interface ClusterHistoryBounds {
  maxEvents: number;
  ttlSeconds: number;
  /** maxHistoryBytes, counted once for every node. */
  maxBytes: number;
}

const COMMON = LUA_PREFIX_AND_CLOCK + `
local now = nowMs()
local function fields(entry)
  local f, kv = {}, entry[2]
  for i = 1, #kv, 2 do f[kv[i]] = kv[i + 1] end
  return f
end
local function serialOf(id)
  local g, s = string.match(id, '^(%d+)-(%d+)$')
  return string.format('%013d-%012d', tonumber(g), tonumber(s))
end
local function streamKey(appId, channel) return P .. 'hist:s:' .. appId .. ':' .. channel end
local function metaKey(appId, channel) return P .. 'hist:m:' .. appId .. ':' .. channel end
-- A new generation for a channel without one: now, or after any the stream still holds, so
-- that serials never go backwards.
local function newGeneration(s)
  local gen = now
  local last = redis.call('XREVRANGE', s, '+', '-', 'COUNT', 1)[1]
  if last then
    local lg = tonumber(string.match(last[1], '^(%d+)-'))
    if lg >= gen then gen = lg + 1 end
  end
  return gen
end
local function firstEntry(s) return redis.call('XRANGE', s, '-', '+', 'COUNT', 1)[1] end
-- Drops the channel's oldest kept event: its bytes, false when it keeps none.
local function dropOldest(appId, channel)
  local s = streamKey(appId, channel)
  local first = firstEntry(s)
  if not first then return false end
  local b = tonumber(fields(first).b)
  redis.call('XDEL', s, first[1])
  redis.call('DECRBY', P .. 'hist:b:' .. appId, b)
  return b
end
-- Scores the channel in its app's order by its oldest kept event (out of it when none).
local function rescore(appId, channel)
  local s = streamKey(appId, channel)
  local first = firstEntry(s)
  if first then
    redis.call('ZADD', P .. 'hist:o:' .. appId, tonumber(fields(first).t), channel)
  else
    redis.call('ZREM', P .. 'hist:o:' .. appId, channel)
    redis.call('DEL', s)
  end
end
-- Drops the channel's events older than ttlMs; answers how many.
local function expire(appId, channel, ttlMs)
  local s = streamKey(appId, channel)
  local n = 0
  while true do
    local first = firstEntry(s)
    if not first or tonumber(fields(first).t) > now - ttlMs then break end
    dropOldest(appId, channel)
    n = n + 1
  end
  if n > 0 then rescore(appId, channel) end
  return n
end
`;

/**
 * ARGV: prefix, appId, channel, event, data, userId ('' none), bytes, maxEvents, ttlMs,
 * maxBytes, keepMs, topic, envelope head (origin and except socket, each ended by a newline),
 * frame head (the frame up to its serial's opening quote), except socket ('' none). Returns
 * the serial.
 */
const APPEND = `
local appId, channel, event, data, userId, except = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[15]
local bytes, maxEvents, ttl, maxBytes, keep = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local s, m = streamKey(appId, channel), metaKey(appId, channel)
local b, o, c = P .. 'hist:b:' .. appId, P .. 'hist:o:' .. appId, P .. 'hist:c:' .. appId
local gen = tonumber(redis.call('HGET', m, 'g') or '0')
local seq
if gen == 0 then
  gen = newGeneration(s)
  seq = 1
  redis.call('HSET', m, 'g', gen, 's', 1)
else
  seq = redis.call('HINCRBY', m, 's', 1)
end
local serial = string.format('%013d-%012d', gen, seq)
local dropped = expire(appId, channel, ttl)
if bytes > maxBytes then
  -- Not kept: the older ones go too, so that what is kept stays an unbroken run.
  while dropOldest(appId, channel) do end
  rescore(appId, channel)
else
  local entry = {'e', event, 'd', data, 't', now, 'b', bytes}
  for _, kv in ipairs({{'u', userId}, {'x', except}}) do
    if kv[2] ~= '' then
      entry[#entry + 1] = kv[1]
      entry[#entry + 1] = kv[2]
    end
  end
  redis.call('XADD', s, string.format('%d-%d', gen, seq), unpack(entry))
  local used = redis.call('INCRBY', b, bytes)
  -- Scored by its oldest event's time; a channel kept already keeps its score unless that one goes.
  redis.call('ZADD', o, 'NX', now, channel)
  local over = redis.call('XLEN', s) - maxEvents
  for _ = 1, over do
    used = used - dropOldest(appId, channel)
    dropped = dropped + 1
  end
  while used > maxBytes do
    local oldest = redis.call('ZRANGE', o, 0, 0)[1]
    if not oldest then break end
    local gone = dropOldest(appId, oldest)
    if gone then used = used - gone end
    rescore(appId, oldest)
  end
  if dropped > 0 then rescore(appId, channel) end
end
redis.call('ZADD', c, now, channel)
redis.call('PEXPIRE', m, keep)
for _, k in ipairs({s, b, o, c}) do redis.call('PEXPIRE', k, keep + ttl + 60000) end
redis.call('PUBLISH', ARGV[12], ARGV[13] .. ARGV[14] .. serial .. '"}')
return serial
`;

/**
 * ARGV: prefix, appId, channel, since ('' none), since as a stream id, limit, ttlMs, mark topic
 * ('' none), mark message. Returns {complete, last serial given ('' none), serial, event, data,
 * publishedAt, userId, except socket, ...} ('' for no user id, no except socket).
 */
const READ = `
local appId, channel, since, sinceId = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local limit, ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
local s, m = streamKey(appId, channel), metaKey(appId, channel)
expire(appId, channel, ttl)
local rows, complete
if since == '' then
  rows = redis.call('XREVRANGE', s, '+', '-', 'COUNT', limit + 1)
  complete = #rows <= limit
  local ordered = {}
  for i = math.min(#rows, limit), 1, -1 do ordered[#ordered + 1] = rows[i] end
  rows = ordered
else
  rows = redis.call('XRANGE', s, '(' .. sinceId, '+', 'COUNT', limit + 1)
  local reaches
  local first = firstEntry(s)
  if first then
    local g, q = string.match(first[1], '^(%d+)-(%d+)$')
    reaches = since >= serialOf(first[1]) or since == string.format('%013d-%012d', tonumber(g), tonumber(q) - 1)
  else
    local g, q = redis.call('HGET', m, 'g'), redis.call('HGET', m, 's')
    reaches = g ~= false and since >= string.format('%013d-%012d', tonumber(g), tonumber(q))
  end
  complete = reaches and #rows <= limit
  if #rows > limit then rows[#rows] = nil end
end
if ARGV[8] ~= '' then redis.call('PUBLISH', ARGV[8], ARGV[9]) end
local g, q = redis.call('HGET', m, 'g'), redis.call('HGET', m, 's')
local out = {complete and 1 or 0, g and string.format('%013d-%012d', tonumber(g), tonumber(q)) or ''}
for _, row in ipairs(rows) do
  local f = fields(row)
  out[#out + 1] = serialOf(row[1])
  out[#out + 1] = f.e
  out[#out + 1] = f.d
  out[#out + 1] = f.t
  out[#out + 1] = f.u or ''
  out[#out + 1] = f.x or ''
end
return out
`;

/**
 * ARGV: prefix, appId, channel, keepMs, ttlMs, mark topic, mark message. Returns the channel's last
 * serial given, after starting its generation (sequence 0, kept keepMs) when it has none: an
 * event published later gets a serial after it that a read from it reaches. Publishes the mark.
 */
const POINT = `
local appId, channel, keep, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local s, m = streamKey(appId, channel), metaKey(appId, channel)
local gen, seq = tonumber(redis.call('HGET', m, 'g') or '0'), 0
if gen == 0 then
  gen = newGeneration(s)
  redis.call('HSET', m, 'g', gen, 's', 0)
  redis.call('PEXPIRE', m, keep)
  redis.call('ZADD', P .. 'hist:c:' .. appId, now, channel)
  redis.call('PEXPIRE', P .. 'hist:c:' .. appId, keep + ttl + 60000)
else
  seq = tonumber(redis.call('HGET', m, 's'))
end
redis.call('PUBLISH', ARGV[6], ARGV[7])
return string.format('%013d-%012d', gen, seq)
`;

/**
 * ARGV: prefix, then per app: appId, ttlMs, keepMs. Drops expired events (up to a batch of
 * channels per app) and forgets channels quiet for longer than keepMs.
 */
const PRUNE = `
for i = 2, #ARGV, 3 do
  local appId, ttl, keep = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local o, c = P .. 'hist:o:' .. appId, P .. 'hist:c:' .. appId
  for _, channel in ipairs(redis.call('ZRANGEBYSCORE', o, '-inf', now - ttl, 'LIMIT', 0, ${PRUNE_BATCH})) do expire(appId, channel, ttl) end
  for _, channel in ipairs(redis.call('ZRANGEBYSCORE', c, '-inf', now - keep, 'LIMIT', 0, ${PRUNE_BATCH})) do
    while dropOldest(appId, channel) do end
    rescore(appId, channel)
    redis.call('DEL', metaKey(appId, channel))
    redis.call('ZREM', c, channel)
  end
end
return 0
`;

/** ARGV: prefix, appId, max. Drops up to \`max\` of the app's channels; returns how many are left. */
const FORGET = `
local appId, max = ARGV[2], tonumber(ARGV[3])
local o, c = P .. 'hist:o:' .. appId, P .. 'hist:c:' .. appId
for _, key in ipairs({o, c}) do
  for _, channel in ipairs(redis.call('ZRANGE', key, 0, max - 1)) do
    redis.call('DEL', streamKey(appId, channel), metaKey(appId, channel))
    redis.call('ZREM', o, channel)
    redis.call('ZREM', c, channel)
  end
end
local left = redis.call('ZCARD', o) + redis.call('ZCARD', c)
if left == 0 then redis.call('DEL', P .. 'hist:b:' .. appId) end
return left
`;

const SCRIPTS = new LuaScripts(COMMON, {
  heraldHistoryAppend: APPEND,
  heraldHistoryRead: READ,
  heraldHistoryPoint: POINT,
  heraldHistoryPrune: PRUNE,
  heraldHistoryForget: FORGET,
});

/** A read's mark: published to `topic` in the step that reads (history-seam.ts). */
export interface HistoryMark {
  topic: string;
  message: string;
}

/** A read of kept events in their envelopes; `lastGiven`: the channel's last serial given ('' none). */
export interface EnvelopeRead {
  envelopes: KeptEnvelope[];
  complete: boolean;
  lastGiven: string;
}

export class RedisHistory {
  private readonly run: ReturnType<typeof SCRIPTS.define>;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    this.run = SCRIPTS.define(redis);
  }

  /**
   * Keeps an event with the channel's next serial and publishes its frame (`frameHead` +
   * serial + `"}`) to `topic`, from every node's point of view at once. Resolves with the
   * serial once Redis has both; RedisUnavailableError during an outage (nothing kept or sent).
   */
  async append(
    e: { appId: string; channel: string; event: string; data: string; userId?: string; exceptSocketId?: string },
    bounds: ClusterHistoryBounds,
    topic: string,
    frameHead: string,
  ): Promise<string> {
    const envelopeHead = `${HISTORY_ORIGIN}\n${e.exceptSocketId ?? ''}\n`;
    const args = [
      this.prefix, e.appId, e.channel, e.event, e.data, e.userId ?? '', cacheEntryBytes(e.channel, e.event, e.data),
      bounds.maxEvents, bounds.ttlSeconds * 1000, bounds.maxBytes, keepMs(bounds.ttlSeconds), topic, envelopeHead, frameHead, e.exceptSocketId ?? '',
    ];
    return (await whenAvailable(() => this.run.heraldHistoryAppend(...args))) as string;
  }

  /**
   * The kept events after `since` (a serial, parseSerial), at most `limit`, or the last `limit`
   * without it; with `mark`, publishes it in the same step. `lastGiven`: the channel's last
   * serial given at that step ('' when it has no generation).
   */
  async read(appId: string, channel: string, since: string | undefined, limit: number, ttlSeconds: number, mark?: HistoryMark): Promise<HistoryRead & { lastGiven: string }> {
    const { envelopes, complete, lastGiven } = await this.readEnvelopes(appId, channel, since, limit, ttlSeconds, mark);
    return { events: envelopes.map((e) => e.kept), complete, lastGiven };
  }

  /** read(), each event with the socket it is not sent to: for the node's own delivery (history-catch-up.ts) and a recovering join's replay. */
  async readEnvelopes(appId: string, channel: string, since: string | undefined, limit: number, ttlSeconds: number, mark?: HistoryMark): Promise<EnvelopeRead> {
    const parts = since === undefined ? null : parseSerial(since);
    const sinceId = parts ? `${parts.generation}-${parts.sequence}` : '';
    const args = [this.prefix, appId, channel, since ?? '', sinceId, limit, ttlSeconds * 1000, mark?.topic ?? '', mark?.message ?? ''];
    const reply = (await whenAvailable(() => this.run.heraldHistoryRead(...args))) as (number | string)[];
    const envelopes: KeptEnvelope[] = [];
    for (let i = 2; i + 5 < reply.length; i += 6) {
      const kept: KeptEvent = { serial: String(reply[i]), event: String(reply[i + 1]), data: String(reply[i + 2]), publishedAt: Number(reply[i + 3]) };
      if (reply[i + 4] !== '') kept.userId = String(reply[i + 4]);
      envelopes.push({ kept, exceptSocketId: reply[i + 5] === '' ? undefined : String(reply[i + 5]) });
    }
    return { envelopes, complete: reply[0] === 1, lastGiven: String(reply[1]) };
  }

  /**
   * The channel's last serial given, publishing `mark` in the same step; starts the channel's
   * generation when it has none, so that a read from the answer reaches every later event.
   */
  async point(appId: string, channel: string, ttlSeconds: number, mark: HistoryMark): Promise<string> {
    return (await whenAvailable(() => this.run.heraldHistoryPoint(this.prefix, appId, channel, keepMs(ttlSeconds), ttlSeconds * 1000, mark.topic, mark.message))) as string;
  }

  /** Drops expired events and forgets quiet channels of these apps (every node runs it, on a timer). */
  async prune(apps: readonly { appId: string; ttlSeconds: number }[]): Promise<void> {
    if (apps.length === 0) return;
    const args: (string | number)[] = [this.prefix];
    for (const a of apps) args.push(a.appId, a.ttlSeconds * 1000, keepMs(a.ttlSeconds));
    await whenAvailable(() => this.run.heraldHistoryPrune(...args));
  }

  /** Drops everything an app kept (it was removed): an app created later with its id starts empty. */
  async forget(appId: string): Promise<void> {
    let left = 1;
    while (left > 0) left = (await whenAvailable(() => this.run.heraldHistoryForget(this.prefix, appId, FORGET_BATCH))) as number;
  }
}

/** How long a channel's generation outlives its last event, ms. */
function keepMs(ttlSeconds: number): number {
  return Math.max(EMPTY_CHANNEL_KEPT_MS, ttlSeconds * 1000);
}
