/**
 * What every Lua script of the cluster's stores shares (the liveness scripts here; the channel
 * state and history scripts of channels/adapter/redis): the key prefix, Redis's clock, whether a
 * node session is alive, and how a store registers and runs its scripts on a connection.
 *
 * Every script takes the key prefix as ARGV[1] and builds its keys from it. Times come from
 * Redis (`TIME`), not from the nodes, so clock skew between nodes cannot make a live node look dead.
 */
import type { Redis } from 'ioredis';

/** Lua: `P`, the key prefix (ARGV[1]), and `nowMs()`, Redis's time in ms. */
export const LUA_PREFIX_AND_CLOCK = `
local P = ARGV[1]
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/** Lua (after LUA_PREFIX_AND_CLOCK): `sessionAlive(session)`, whether the session is in the membership (keys.ts nodes). */
export const LUA_SESSION_ALIVE = `
local function sessionAlive(session)
  return redis.call('ZSCORE', P .. 'nodes', session) ~= false
end
`;

/** A connection seen as the scripts defined on it: each resolves to the script's reply. */
export type ScriptRunner<Name extends string> = Record<Name, (...args: (string | number)[]) => Promise<unknown>>;

/** A store's scripts (name → body), each run after the prelude they share. */
export class LuaScripts<Name extends string> {
  constructor(
    private readonly common: string,
    private readonly bodies: Readonly<Record<Name, string>>,
  ) {}

  /**
   * Registers every script on a connection, once per name (EVALSHA, loaded on first use per
   * socket), and returns the connection as their runner.
   */
  define(redis: Redis): ScriptRunner<Name> {
    const defined = redis as unknown as Partial<ScriptRunner<Name>>;
    for (const [name, body] of Object.entries<string>(this.bodies)) {
      if (!defined[name as Name]) redis.defineCommand(name, { numberOfKeys: 0, lua: this.common + body });
    }
    return redis as unknown as ScriptRunner<Name>;
  }

  /** Runs a script defined on the connection (auto-pipelined with the other commands of the turn). */
  run<T>(redis: Redis, name: Name, args: (string | number)[]): Promise<T> {
    return (redis as unknown as ScriptRunner<Name>)[name](...args) as Promise<T>;
  }
}
