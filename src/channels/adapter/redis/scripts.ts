/**
 * The Lua scripts that change shared channel state. Each runs atomically in Redis, so two nodes
 * racing on one channel (or two survivors racing to reap one dead node) see each other's writes
 * whole: the node whose script makes a count go 0 → 1 (or 1 → 0) is the one, in the whole
 * cluster, that reports the transition (channel_occupied, member_added, ...).
 *
 * Every script takes the key prefix as ARGV[1] and builds its keys from it, following the
 * layout of keys.ts (and of src/cluster/keys.ts and webhooks/shared-outbox-keys.ts, which they
 * write too; the reaper's keys depend on data it reads, so they cannot be declared up front).
 * That is fine on a single Redis primary (with replicas or Sentinel); Redis Cluster,
 * which needs declared keys on one slot, is not supported (docs/scaling.md).
 *
 * Times come from Redis (`TIME`), not from the nodes, so clock skew between nodes cannot make a
 * live node look dead. A script reads one instant: nothing here waits for `TIME` to advance
 * within a script (from Redis 8 on, it returns the same time throughout one script).
 */
import { LUA_PREFIX_AND_CLOCK, LUA_SESSION_ALIVE, LuaScripts } from '../../../cluster/lua-scripts.js';

/** How long (ms) a leave-debounce hold outlives its debounce, so a late holder can still release it. */
export const HOLD_GRACE_MS = 60_000;

/** The adapter's own channels between nodes: occupied in Redis, never listed or counted as an app's. */
export const HIDDEN_CHANNELS: readonly string[] = ['#online', '#watch'];

const COMMON = LUA_PREFIX_AND_CLOCK + LUA_SESSION_ALIVE + `
local HOLD_GRACE_MS = ${HOLD_GRACE_MS}
local HIDDEN = {${HIDDEN_CHANNELS.map((c) => `['${c}'] = true`).join(', ')}}
-- Keeps the count of occupied channels of every app (keys.ts occupiedTotal) as one becomes occupied or vacated.
local function countOccupied(channel, by)
  if not HIDDEN[channel] then redis.call('INCRBY', P .. 'occupied', by) end
end
-- Removes one subscription of a session: {vacated, removed user id or false, count after}, or nil.
local function leaveOne(session, appId, channel, socketId)
  local cid = appId .. ':' .. channel
  local nsubs = P .. 'nsubs:' .. session .. ':' .. cid
  local tag = redis.call('HGET', nsubs, socketId)
  if not tag then return nil end
  redis.call('HDEL', nsubs, socketId)
  if redis.call('EXISTS', nsubs) == 0 then redis.call('SREM', P .. 'nchans:' .. session, cid) end
  local subsKey = P .. 'subs:' .. cid
  local count = redis.call('DECR', subsKey)
  local vacated = false
  if count <= 0 then
    count = 0
    vacated = true
    redis.call('DEL', subsKey)
    if redis.call('ZREM', P .. 'chans:' .. appId, channel) == 1 then countOccupied(channel, -1) end
  end
  local removed = false
  if string.sub(tag, 1, 1) == '+' then
    local userId = string.sub(tag, 2)
    local usersKey = P .. 'users:' .. cid
    if redis.call('HINCRBY', usersKey, userId, -1) <= 0 then
      redis.call('HDEL', usersKey, userId)
      redis.call('HDEL', P .. 'uinfo:' .. cid, userId)
      removed = userId
    end
  end
  return {vacated, removed, count}
end
-- A webhook held by the leave debounce, as a member of webhooks:held (webhooks/shared-outbox-keys.ts webhookHeld).
local function heldMember(kind, cid, token, userId)
  if kind == 'c' then return 'c|' .. cid .. '|' .. token end
  return 'm|' .. cid .. '|' .. token .. '|' .. userId
end
`;

/**
 * The four changes a node makes all the time, as Lua functions the BATCH script applies one
 * after the other (state-batch.ts sends a node's changes of one event-loop turn as one call).
 *
 * joinOne: presence ('1'|'0'), maxMembers (0 = no limit). Returns {status, occupied,
 * memberAdded, count, members, resumedChannel, resumedMember}: status 1 joined, 0 already
 * subscribed (nothing changed), -1 presence channel full, -2 the session is not alive (reaped
 * or never started: the node must re-register under a new session). resumed*: the join
 * cancelled a live leave-debounce hold.
 *
 * leaveOp: debounceMs (0: no holds). Returns {changed, vacated, removed?, count, userId, channel
 * hold token, member hold token}. With a debounce, a vacate or member removal leaves a hold
 * (token `<expiry ms>|<session>|<socketId>`) that a join within debounceMs cancels; the leaver
 * releases it when its debounce ends (releaseHoldOne).
 *
 * connectOne: maxConnections (0 = no limit). Returns {status, connections}: 1 accepted (or
 * already counted), 0 refused (app full), -2 session not alive.
 *
 * disconnectOne: returns the app's connections after.
 *
 * releaseHoldOne: userId ('' for the channel hold), token. The holder, at the end of its
 * debounce: 1 when its hold is still there (send the held event; the hold is removed), 0 when a
 * join cancelled it (drop the held event).
 *
 * cacheGetOne: {cached JSON, pttl}, or {} when the cache channel has no live event (an empty
 * table, not false: false would end the batch's reply array there).
 */
const OPS = `
local function joinOne(session, appId, channel, socketId, presenceFlag, userId, userInfo, maxMembers)
  local presence = presenceFlag == '1'
  if not sessionAlive(session) then return {-2, 0, 0, 0, {}} end
  local cid = appId .. ':' .. channel
  local nsubs = P .. 'nsubs:' .. session .. ':' .. cid
  local subsKey = P .. 'subs:' .. cid
  local usersKey = P .. 'users:' .. cid
  local infoKey = P .. 'uinfo:' .. cid
  local function members()
    if presence then return redis.call('HGETALL', infoKey) end
    return {}
  end
  if redis.call('HEXISTS', nsubs, socketId) == 1 then
    return {0, 0, 0, tonumber(redis.call('GET', subsKey) or '0'), members()}
  end
  if presence and maxMembers > 0 and redis.call('HEXISTS', usersKey, userId) == 0 and redis.call('HLEN', usersKey) >= maxMembers then
    return {-1, 0, 0, tonumber(redis.call('GET', subsKey) or '0'), {}}
  end
  local tag = '-'
  if presence then tag = '+' .. userId end
  redis.call('HSET', nsubs, socketId, tag)
  redis.call('SADD', P .. 'nchans:' .. session, cid)
  local count = redis.call('INCR', subsKey)
  local occupied = 0
  if count == 1 then
    occupied = 1
    if redis.call('ZADD', P .. 'chans:' .. appId, 0, channel) == 1 then countOccupied(channel, 1) end
  end
  local added = 0
  if presence and redis.call('HINCRBY', usersKey, userId, 1) == 1 then
    added = 1
    redis.call('HSET', infoKey, userId, userInfo)
  end
  -- A hold left by a leave within the leave debounce: this join cancels it (its vacated or
  -- member_removed is dropped by the holder, and this occupied / member_added is not reported).
  -- An expired hold is left alone: its holder is sending it.
  local resumedChannel, resumedMember = 0, 0
  if occupied == 1 then
    local h = redis.call('GET', P .. 'holdc:' .. cid)
    if h and tonumber(string.match(h, '^(%d+)|')) > nowMs() then
      redis.call('DEL', P .. 'holdc:' .. cid)
      redis.call('ZREM', P .. 'webhooks:held', heldMember('c', cid, h, ''))
      resumedChannel = 1
    end
  end
  if added == 1 then
    local h = redis.call('HGET', P .. 'holdm:' .. cid, userId)
    if h and tonumber(string.match(h, '^(%d+)|')) > nowMs() then
      redis.call('HDEL', P .. 'holdm:' .. cid, userId)
      redis.call('ZREM', P .. 'webhooks:held', heldMember('m', cid, h, userId))
      resumedMember = 1
    end
  end
  return {1, occupied, added, count, members(), resumedChannel, resumedMember}
end

local function leaveOp(session, appId, channel, socketId, debounce)
  local r = leaveOne(session, appId, channel, socketId)
  if not r then return {0, 0, 0, tonumber(redis.call('GET', P .. 'subs:' .. appId .. ':' .. channel) or '0'), '', '', ''} end
  local cid = appId .. ':' .. channel
  local vacated, removed = 0, 0
  local userId, channelHold, memberHold = '', '', ''
  local token = ''
  if debounce > 0 and (r[1] or r[2]) then token = (nowMs() + debounce) .. '|' .. session .. '|' .. socketId end
  local due = nowMs() + debounce
  if r[1] then
    vacated = 1
    if debounce > 0 then
      channelHold = token
      redis.call('SET', P .. 'holdc:' .. cid, token, 'PX', debounce + HOLD_GRACE_MS)
      redis.call('ZADD', P .. 'webhooks:held', due, heldMember('c', cid, token, ''))
    end
  end
  if r[2] then
    removed = 1
    userId = r[2]
    if debounce > 0 then
      memberHold = token
      redis.call('HSET', P .. 'holdm:' .. cid, userId, token)
      redis.call('PEXPIRE', P .. 'holdm:' .. cid, debounce + HOLD_GRACE_MS)
      redis.call('ZADD', P .. 'webhooks:held', due, heldMember('m', cid, token, userId))
    end
  end
  return {1, vacated, removed, r[3], userId, channelHold, memberHold}
end

local function connectOne(session, appId, socketId, max)
  if not sessionAlive(session) then return {-2, 0} end
  local key = P .. 'sockets:' .. appId
  if redis.call('HEXISTS', key, socketId) == 1 then return {1, redis.call('HLEN', key)} end
  local n = redis.call('HLEN', key)
  if max > 0 and n >= max then return {0, n} end
  redis.call('HSET', key, socketId, session)
  redis.call('SADD', P .. 'nsockets:' .. session, socketId .. ':' .. appId)
  return {1, n + 1}
end

local function disconnectOne(session, appId, socketId)
  local key = P .. 'sockets:' .. appId
  if redis.call('HGET', key, socketId) == session then redis.call('HDEL', key, socketId) end
  redis.call('SREM', P .. 'nsockets:' .. session, socketId .. ':' .. appId)
  return redis.call('HLEN', key)
end

local function releaseHoldOne(appId, channel, userId, token)
  local cid = appId .. ':' .. channel
  if userId == '' then
    redis.call('ZREM', P .. 'webhooks:held', heldMember('c', cid, token, ''))
    if redis.call('GET', P .. 'holdc:' .. cid) == token then redis.call('DEL', P .. 'holdc:' .. cid); return 1 end
    return 0
  end
  redis.call('ZREM', P .. 'webhooks:held', heldMember('m', cid, token, userId))
  if redis.call('HGET', P .. 'holdm:' .. cid, userId) == token then redis.call('HDEL', P .. 'holdm:' .. cid, userId); return 1 end
  return 0
end

local function cacheGetOne(appId, channel)
  local key = P .. 'cache:' .. appId .. ':' .. channel
  local v = redis.call('GET', key)
  if not v then return {} end
  return {v, redis.call('PTTL', key)}
end
`;

/**
 * ARGV: prefix, then operations one after the other, each a letter and its arguments:
 * `j` session appId channel socketId presence userId userInfo maxMembers (joinOne), `l` session
 * appId channel socketId debounceMs (leaveOp), `c` session appId socketId maxConnections
 * (connectOne), `d` session appId socketId (disconnectOne), `r` appId channel userId token
 * (releaseHoldOne), `g` appId channel (cacheGetOne). Applies them in that order, each
 * seeing the ones before it (as separate scripts in a row would), and returns their replies in
 * that order.
 */
const BATCH = `
local out = {}
local i = 2
local n = #ARGV
while i <= n do
  local op = ARGV[i]
  if op == 'j' then
    out[#out + 1] = joinOne(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], tonumber(ARGV[i + 8]))
    i = i + 9
  elseif op == 'l' then
    out[#out + 1] = leaveOp(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]))
    i = i + 6
  elseif op == 'c' then
    out[#out + 1] = connectOne(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]))
    i = i + 5
  elseif op == 'd' then
    out[#out + 1] = disconnectOne(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  elseif op == 'r' then
    out[#out + 1] = releaseHoldOne(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
    i = i + 5
  elseif op == 'g' then
    out[#out + 1] = cacheGetOne(ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  else
    return redis.error_reply('heraldBatch: unknown operation ' .. tostring(op))
  end
end
return out
`;

/** ARGV: prefix, appId, channel, wantCache ('1'|'0'). Returns {count, userCount, cached JSON or false, pttl}. */
const INFO = `
local cid = ARGV[2] .. ':' .. ARGV[3]
local count = tonumber(redis.call('GET', P .. 'subs:' .. cid) or '0')
local users = redis.call('HLEN', P .. 'users:' .. cid)
local cached, pttl = false, -2
if ARGV[4] == '1' then
  cached = redis.call('GET', P .. 'cache:' .. cid)
  if cached then pttl = redis.call('PTTL', P .. 'cache:' .. cid) end
end
return {count, users, cached, pttl}
`;

/** ARGV: prefix, appId, prefix of channel names ('' = all), withUsers ('1'|'0'). Returns flat {name, users, ...}. */
const LIST = `
local appId, namePrefix = ARGV[2], ARGV[3]
local names
if namePrefix == '' then
  names = redis.call('ZRANGEBYLEX', P .. 'chans:' .. appId, '-', '+')
else
  names = redis.call('ZRANGEBYLEX', P .. 'chans:' .. appId, '[' .. namePrefix, '[' .. namePrefix .. '\\255')
end
local out = {}
for _, name in ipairs(names) do
  out[#out + 1] = name
  if ARGV[4] == '1' then out[#out + 1] = redis.call('HLEN', P .. 'users:' .. appId .. ':' .. name) else out[#out + 1] = 0 end
end
return out
`;

/**
 * ARGV: prefix, then app ids. Returns {occupied channels of every app, then of each app given}
 * (hidden channels left out), without listing any: the overview's figures.
 */
const COUNTS = `
local out = {math.max(0, tonumber(redis.call('GET', P .. 'occupied') or '0'))}
for i = 2, #ARGV do
  local key = P .. 'chans:' .. ARGV[i]
  local n = redis.call('ZCARD', key)
  for name in pairs(HIDDEN) do
    if redis.call('ZSCORE', key, name) then n = n - 1 end
  end
  out[#out + 1] = n
end
return out
`;

/**
 * ARGV: prefix, appId, channel, entry JSON, ttlMs, maxBytes, bytes. Stores a cache channel's last
 * event within the app's maxCacheBytes, counted cluster-wide as one node counts it per shard:
 * `bytes` (channel + event + data) per entry; storing past the bound evicts the app's
 * oldest-written entries first; an entry larger than the bound is not stored (and the
 * channel's previous entry is gone). Expired entries no longer count. Per app: `cachesz:<appId>`
 * (channel → bytes), `cacheord:<appId>` (channel by expiry time: write order, the app's TTL
 * being one; a write in the same millisecond as the newest scores just after it),
 * `cachebytes:<appId>` (their sum), each expiring with the newest entry. Returns 1 stored, 0 too
 * large.
 */
const CACHE_SET = `
local appId, channel, entry = ARGV[2], ARGV[3], ARGV[4]
local ttl, max, bytes = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local sizes, order, total = P .. 'cachesz:' .. appId, P .. 'cacheord:' .. appId, P .. 'cachebytes:' .. appId
local now = nowMs()
local function forget(name)
  local b = tonumber(redis.call('HGET', sizes, name) or '0')
  redis.call('HDEL', sizes, name)
  redis.call('ZREM', order, name)
  redis.call('DECRBY', total, b)
  return b
end
for _, name in ipairs(redis.call('ZRANGEBYSCORE', order, '-inf', now)) do forget(name) end
if redis.call('HEXISTS', sizes, channel) == 1 then forget(channel) end
local key = P .. 'cache:' .. appId .. ':' .. channel
if bytes > max then
  redis.call('DEL', key)
  return 0
end
local used = tonumber(redis.call('GET', total) or '0')
while used + bytes > max do
  local oldest = redis.call('ZRANGE', order, 0, 0)[1]
  if not oldest then break end
  used = used - forget(oldest)
  redis.call('DEL', P .. 'cache:' .. appId .. ':' .. oldest)
end
redis.call('SET', key, entry, 'PX', ttl)
redis.call('HSET', sizes, channel, bytes)
-- Scored by expiry, which is write order (one TTL per app); a write in the same millisecond as
-- the newest entry scores just after it, so the oldest written is still evicted first.
local score = now + ttl
local newest = redis.call('ZRANGE', order, -1, -1, 'WITHSCORES')[2]
if newest and tonumber(newest) >= score then score = tonumber(newest) + 0.001 end
redis.call('ZADD', order, string.format('%.3f', score), channel)
redis.call('INCRBY', total, bytes)
redis.call('PEXPIRE', sizes, ttl)
redis.call('PEXPIRE', order, ttl)
redis.call('PEXPIRE', total, ttl)
return 1
`;

/**
 * ARGV: prefix, appId, max. Drops up to \`max\` of the app's cached events (the oldest written
 * first, from its cacheord index) with their index entries; returns how many are left. The
 * caller repeats until none is, then the app's cache counters are gone too.
 */
const CACHE_FORGET = `
local appId, max = ARGV[2], tonumber(ARGV[3])
local sizes, order, total = P .. 'cachesz:' .. appId, P .. 'cacheord:' .. appId, P .. 'cachebytes:' .. appId
local names = redis.call('ZRANGE', order, 0, max - 1)
for _, name in ipairs(names) do
  redis.call('DEL', P .. 'cache:' .. appId .. ':' .. name)
  redis.call('HDEL', sizes, name)
  redis.call('ZREM', order, name)
end
local left = redis.call('ZCARD', order)
if left == 0 then redis.call('DEL', sizes, order, total) end
return left
`;

/**
 * ARGV: prefix, appId, messages, quota. The day is Redis' UTC day. Returns {accepted, used}: a
 * refused charge is not counted. Counters expire two days after their day starts.
 */
const CHARGE_QUOTA = `
local day = math.floor(nowMs() / 86400000)
local key = P .. 'quota:' .. day .. ':' .. ARGV[2]
local n, quota = tonumber(ARGV[3]), tonumber(ARGV[4])
local used = tonumber(redis.call('GET', key) or '0')
if used + n > quota then return {0, used} end
used = redis.call('INCRBY', key, n)
if used == n then redis.call('PEXPIREAT', key, (day + 2) * 86400000) end
return {1, used}
`;

/** ARGV: prefix, appId. Deletes the app's counter of Redis' UTC day (a removed app's). */
const FORGET_QUOTA = `
local day = math.floor(nowMs() / 86400000)
return redis.call('DEL', P .. 'quota:' .. day .. ':' .. ARGV[2])
`;

/**
 * ARGV: prefix, key, cost, limit. A fixed one-second window of Redis' clock, shared by every
 * node. Returns 0 when `cost` was taken, else the ms until the window ends (nothing taken).
 * Counters expire two seconds after they are first taken.
 */
const RATE_TAKE = `
local now = nowMs()
local key = P .. 'rate:' .. math.floor(now / 1000) .. ':' .. ARGV[2]
local cost, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local used = tonumber(redis.call('GET', key) or '0')
if used + cost > limit then return 1000 - (now % 1000) end
if redis.call('INCRBY', key, cost) == cost then redis.call('PEXPIRE', key, 2000) end
return 0
`;

/**
 * ARGV: prefix, me, dead, timeoutMs, batch. Removes up to `batch` channels' worth of the dead
 * session's subscriptions (then its sockets), renewing the claim `me` holds on it (the
 * liveness' claim, src/cluster/liveness-scripts.ts) in the same atomic step, and ends the claim
 * with the last step. SPOP hands each channel to exactly one call, so every transition is
 * reported once. Returns JSON
 * {lost?, done, channels: [{appId, channel, removed: [userId], vacated, count, sockets}]}.
 */
const REAP_BATCH = `
local me, dead, timeout, batch = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local current = redis.call('HGET', P .. 'reaping', dead)
if not current or string.match(current, '^(.*)|%d+$') ~= me then return cjson.encode({lost = true, done = false}) end
redis.call('HSET', P .. 'reaping', dead, me .. '|' .. (nowMs() + timeout))
local out = {}
local cids = redis.call('SPOP', P .. 'nchans:' .. dead, batch)
for _, cid in ipairs(cids) do
  local appId, channel = string.match(cid, '^(.*):([^:]*)$')
  local nsubs = P .. 'nsubs:' .. dead .. ':' .. cid
  local subs = redis.call('HKEYS', nsubs)
  local entry = {appId = appId, channel = channel, removed = {}, vacated = false, count = 0, sockets = #subs}
  for _, socketId in ipairs(subs) do
    local r = leaveOne(dead, appId, channel, socketId)
    if r then
      if r[1] then entry.vacated = true end
      if r[2] then entry.removed[#entry.removed + 1] = r[2] end
      entry.count = r[3]
    end
  end
  redis.call('DEL', nsubs)
  if #subs > 0 then out[#out + 1] = entry end
end
local done = false
if #cids == 0 then
  local socks = redis.call('SPOP', P .. 'nsockets:' .. dead, batch * 100)
  for _, m in ipairs(socks) do
    local socketId, appId = string.match(m, '^([^:]*):(.*)$')
    if redis.call('HGET', P .. 'sockets:' .. appId, socketId) == dead then redis.call('HDEL', P .. 'sockets:' .. appId, socketId) end
  end
  if #socks == 0 then
    redis.call('HDEL', P .. 'reaping', dead)
    redis.call('ZREM', P .. 'nodes', dead)
    done = true
  end
end
return cjson.encode({done = done, channels = out})
`;

/**
 * ARGV: prefix, max. Releases up to `max` held webhooks whose page-reload debounce is over (any
 * node's: the one that decided them may be gone): each goes into the webhook outbox stream as a
 * channel message with an id derived from its hold (the same if it were released twice), and
 * its hold is removed. A join within the debounce removed the member along with the hold, so
 * what is still here is due. Returns how many were released.
 */
const RELEASE_HELD = `
local now = nowMs()
local held = P .. 'webhooks:held'
local n = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', held, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  redis.call('ZREM', held, m)
  local kind, cid, token, userId = string.match(m, '^(%a)|([^|]*)|(%d+|[^|]*|[^|]*)|?(.*)$')
  local appId, channel = string.match(cid or '', '^(.*):([^:]*)$')
  if appId then
    local ev
    if kind == 'c' then
      if redis.call('GET', P .. 'holdc:' .. cid) == token then redis.call('DEL', P .. 'holdc:' .. cid) end
      ev = {name = 'channel_vacated', channel = channel}
    else
      if redis.call('HGET', P .. 'holdm:' .. cid, userId) == token then redis.call('HDEL', P .. 'holdm:' .. cid, userId) end
      ev = {name = 'member_removed', channel = channel, user_id = userId}
    end
    local h = redis.sha1hex(P .. m)
    ev.id = string.sub(h, 1, 8) .. '-' .. string.sub(h, 9, 12) .. '-' .. string.sub(h, 13, 16) .. '-' .. string.sub(h, 17, 20) .. '-' .. string.sub(h, 21, 32)
    redis.call('XADD', P .. 'webhooks', '*', 'm', cjson.encode({k = 'channel', appId = appId, events = {ev}, createdAt = now}))
    n = n + 1
  end
end
return n
`;

/** The channel state scripts, registered on every connection that runs them (ChannelState, SessionRecords). */
export const STATE_SCRIPTS = new LuaScripts(COMMON, {
  heraldBatch: OPS + BATCH,
  heraldInfo: INFO,
  heraldList: LIST,
  heraldCounts: COUNTS,
  heraldCacheSet: CACHE_SET,
  heraldCacheForget: CACHE_FORGET,
  heraldChargeQuota: CHARGE_QUOTA,
  heraldForgetQuota: FORGET_QUOTA,
  heraldRateTake: RATE_TAKE,
  heraldReapBatch: REAP_BATCH,
  heraldReleaseHeld: RELEASE_HELD,
});
