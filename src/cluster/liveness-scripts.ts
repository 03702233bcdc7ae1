/**
 * The Lua scripts of a node's liveness (liveness.ts): heartbeats and the claims on dead sessions,
 * on the cluster's own keys (keys.ts). Each runs atomically in Redis, so two survivors racing to
 * claim one dead session see each other's writes whole: exactly one wins it. The reap that
 * follows a claim belongs to the area whose records it removes (SessionRecords.reap); it renews
 * the claim in its own scripts, in the same atomic step as each removal.
 *
 * Every script takes the key prefix as ARGV[1] and builds its keys from it. Times come from
 * Redis (`TIME`), not from the nodes, so clock skew between nodes cannot make a live node look dead.
 */
import { LUA_PREFIX_AND_CLOCK, LUA_SESSION_ALIVE, LuaScripts } from './lua-scripts.js';

/**
 * Lua: `noteLiveness(now, timeoutMs)`, run by every liveness script. When Redis ran none of any
 * node for over half a timeout (every node beats every third of one), Redis itself was silent:
 * stalled (a long fork, swapped out, stopped) or cut off from every node. Each session then lost
 * that time from its expiry without its node being silent, so nobody is claimed dead (`reapHeld`)
 * until every node has had a full timeout to beat again. The last run's time has no TTL: a
 * stall must not erase it.
 */
const LUA_STALL_GUARD = `
local function noteLiveness(now, timeout)
  local last = tonumber(redis.call('GET', P .. 'liveness:last'))
  redis.call('SET', P .. 'liveness:last', now)
  if last and now - last > timeout / 2 then
    redis.call('SET', P .. 'liveness:hold', last, 'PX', timeout)
  end
end
local function reapHeld()
  return redis.call('EXISTS', P .. 'liveness:hold') == 1
end
`;

const COMMON = LUA_PREFIX_AND_CLOCK + LUA_SESSION_ALIVE + LUA_STALL_GUARD;

/**
 * ARGV: prefix, session, timeoutMs, mode ('start'|'beat'). 'start' registers the session;
 * 'beat' extends it only if it is still registered. Returns 1, or 0 when the session is gone
 * (reaped: the node must re-register under a new session).
 */
const HEARTBEAT = `
local session, timeout = ARGV[2], tonumber(ARGV[3])
local now = nowMs()
noteLiveness(now, timeout)
if ARGV[4] ~= 'start' and not sessionAlive(session) then return 0 end
redis.call('ZADD', P .. 'nodes', now + timeout, session)
return 1
`;

/**
 * ARGV: prefix, me, timeoutMs, max. Claims up to `max` sessions whose heartbeat expired, and
 * reaps whose claimant stopped renewing its claim; none for a timeout after Redis was silent
 * (noteLiveness). Atomic: one claimant per dead session. Returns the claimed session ids.
 */
const CLAIM_DEAD = `
local me, timeout, max = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now = nowMs()
noteLiveness(now, timeout)
if reapHeld() then return {} end
local claim = me .. '|' .. (now + timeout)
local claimed = {}
for _, s in ipairs(redis.call('ZRANGEBYSCORE', P .. 'nodes', '-inf', now, 'LIMIT', 0, max)) do
  if s ~= me then
    redis.call('ZREM', P .. 'nodes', s)
    redis.call('HSET', P .. 'reaping', s, claim)
    -- Tells the session's node, should it wake, that the others saw its members leave.
    redis.call('SET', P .. 'reaped:' .. s, me, 'PX', 3600000)
    claimed[#claimed + 1] = s
  end
end
local reaping = redis.call('HGETALL', P .. 'reaping')
for i = 1, #reaping, 2 do
  local s, v = reaping[i], reaping[i + 1]
  local holder, expiry = string.match(v, '^(.*)|(%d+)$')
  if holder ~= me and tonumber(expiry) < now and #claimed < max then
    redis.call('HSET', P .. 'reaping', s, claim)
    claimed[#claimed + 1] = s
  end
end
return claimed
`;

/**
 * ARGV: prefix, me, target, timeoutMs, then the keys that hold the target's records
 * (SessionRecords.keysOf). Claims one given session for reaping (a node retiring its own
 * previous session after re-registering, or its current one at a graceful stop). Returns 1 when
 * claimed, 0 when another live claimant has it or there is nothing of it to reap.
 */
const CLAIM_SESSION = `
local me, target, timeout = ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = nowMs()
noteLiveness(now, timeout)
local current = redis.call('HGET', P .. 'reaping', target)
local function hasRecords()
  for i = 5, #ARGV do
    if redis.call('EXISTS', ARGV[i]) == 1 then return true end
  end
  return false
end
if current then
  local holder, expiry = string.match(current, '^(.*)|(%d+)$')
  if holder ~= me and tonumber(expiry) >= now then return 0 end
elseif not sessionAlive(target) and not hasRecords() then
  return 0
end
redis.call('ZREM', P .. 'nodes', target)
redis.call('HSET', P .. 'reaping', target, me .. '|' .. (now + timeout))
return 1
`;

/** The liveness scripts, registered on the connection NodeLiveness runs them on. */
export const LIVENESS_SCRIPTS = new LuaScripts(COMMON, {
  heraldHeartbeat: HEARTBEAT,
  heraldClaimDead: CLAIM_DEAD,
  heraldClaimSession: CLAIM_SESSION,
});
