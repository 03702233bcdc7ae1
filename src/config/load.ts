/** Loads, validates and freezes the configuration: file, then environment overrides. */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { checkFrontEndThreads } from './front-end-threads.js';
import { z } from 'zod';
import { DEVELOPMENT_CONFIG, configSchema, type HeraldConfig } from './schema.js';
import { isLogLevel, LOG_LEVELS } from '../log.js';
import { checkKeyMaterial, checkTlsFiles } from './key-material.js';
import { defaultMaxConnections } from './fd-limit.js';
import { jsonErrorOffset, lineAndColumn } from './json-position.js';
import { jsonSyntaxReason } from '../json.js';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export interface ConfigSources {
  /** Path given with --config; HERALD_CONFIG is used when absent. */
  configPath?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** Values that win over file and environment (tests, embedding). */
  overrides?: Record<string, unknown>;
}

/**
 * Reads the config file named by --config or HERALD_CONFIG and applies HERALD_* overrides.
 * Without a file, Herald runs with DEVELOPMENT_CONFIG (the public development credentials on
 * loopback); a file, even `{}`, gets only what it says plus the schema's defaults.
 */
export function loadConfig(sources: ConfigSources = {}): Readonly<HeraldConfig> {
  const env = sources.env ?? process.env;
  const path = sources.configPath ?? env.HERALD_CONFIG;
  let raw: Record<string, unknown> = structuredClone(DEVELOPMENT_CONFIG) as Record<string, unknown>;
  if (path) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
    }
    try {
      raw = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new ConfigError(`config file ${path} is not valid JSON at ${jsonWhere(text)}: ${jsonSyntaxReason(err, text)}`);
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new ConfigError(`config file ${path} must hold a JSON object`);
    }
  }
  const fromEnv: Record<string, unknown> = {};
  if (env.HERALD_LOG_LEVEL && !isLogLevel(env.HERALD_LOG_LEVEL)) {
    throw new ConfigError(`environment variable HERALD_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${env.HERALD_LOG_LEVEL}"`);
  }
  if (env.HERALD_HOST) fromEnv.host = env.HERALD_HOST;
  if (env.HERALD_PORT) fromEnv.port = envInteger('HERALD_PORT', env.HERALD_PORT);
  if (env.HERALD_DATA_DIR) fromEnv.dataDir = env.HERALD_DATA_DIR;
  if (env.HERALD_SHARDS) fromEnv.shards = envInteger('HERALD_SHARDS', env.HERALD_SHARDS);
  if (env.HERALD_FRONT_END_THREADS) fromEnv.frontEndThreads = envInteger('HERALD_FRONT_END_THREADS', env.HERALD_FRONT_END_THREADS);
  if (env.HERALD_ADMIN_TOKEN !== undefined) fromEnv.admin = { ...adminOf(raw), token: env.HERALD_ADMIN_TOKEN || null };
  if (env.HERALD_REDIS_URL) {
    // Replaces only the URL (and turns the cluster on): keyPrefix and nodeTimeoutMs keep the file's values or defaults.
    fromEnv.cluster = { ...objectField(raw, 'cluster'), redisUrl: env.HERALD_REDIS_URL };
  }
  if (env.HERALD_POSTGRES_URL) {
    const cluster = (fromEnv.cluster as Record<string, unknown> | undefined) ?? objectField(raw, 'cluster');
    fromEnv.cluster = { ...cluster, postgresUrl: env.HERALD_POSTGRES_URL };
  }
  const sentinel = {
    ...(env.HERALD_REDIS_SENTINELS && { addresses: env.HERALD_REDIS_SENTINELS.split(',').map((a) => a.trim()).filter(Boolean) }),
    ...(env.HERALD_REDIS_SENTINEL_MASTER && { masterName: env.HERALD_REDIS_SENTINEL_MASTER }),
    ...(env.HERALD_REDIS_SENTINEL_PASSWORD && { password: env.HERALD_REDIS_SENTINEL_PASSWORD }),
  };
  if (Object.keys(sentinel).length > 0) {
    // Each replaces its own field of cluster.sentinel; the others keep the file's values.
    const cluster = (fromEnv.cluster as Record<string, unknown> | undefined) ?? objectField(raw, 'cluster');
    fromEnv.cluster = { ...cluster, sentinel: { ...objectField(cluster, 'sentinel'), ...sentinel } };
  }
  const config = parseConfig({ ...raw, ...fromEnv, ...sources.overrides });
  if (!path && !isLoopbackHost(config.host) && env.HERALD_EXPOSE_DEVELOPMENT_DEFAULTS !== '1') {
    throw new ConfigError(
      `without a config file Herald serves its public development credentials and admin token; it will not serve them on ${config.host}, which is not a loopback address. ` +
        'Give it a config file with your own apps and admin token (--config <file> or HERALD_CONFIG), or listen on 127.0.0.1 (HERALD_HOST), ' +
        'or set HERALD_EXPOSE_DEVELOPMENT_DEFAULTS=1 to serve the development defaults on the network knowing that anyone who reaches it can use them',
    );
  }
  return config;
}

/** Validates a raw config object; throws ConfigError naming the path of the first bad field. */
export function parseConfig(raw: unknown): Readonly<HeraldConfig> {
  const result = configSchema.safeParse(withRenamedFields(raw));
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : '(root)';
    throw new ConfigError(`invalid config at ${where}: ${issue.message}`);
  }
  const parsed = result.data;
  checkUnique(parsed.apps.map((a) => a.id), 'apps', 'id');
  checkUnique(parsed.apps.map((a) => a.key), 'apps', 'key');
  checkUnique(parsed.push.map((p) => p.instanceId), 'push', 'instanceId');
  const fail = (field: string, message: string): never => {
    throw new ConfigError(`invalid config at ${field}: ${message}`);
  };
  checkKeyMaterial(parsed, fail);
  if (parsed.tls) checkTlsFiles(parsed.tls, fail);
  const shards = parsed.shards ?? Math.max(1, availableParallelism() - 1);
  const frontEndThreads = checkFrontEndThreads(parsed.frontEndThreads, parsed.cluster !== undefined, fail);
  const maxConnections =
    parsed.maxConnections !== undefined
      ? parsed.maxConnections
      : defaultMaxConnections({ shards, pushConcurrency: parsed.pushDelivery.concurrency, webhookConcurrencyPerUrl: parsed.webhookDelivery.concurrencyPerUrl });
  return deepFreeze({ ...parsed, shards, frontEndThreads, maxConnections });
}

/**
 * Fields read under a deprecated name too: `webhookDelivery.reloadDebounceMs` is
 * `webhookDelivery.pageReloadDebounceMs` (the browser page reload, not the SIGHUP config
 * reload). Both names at once is an error.
 */
function withRenamedFields(raw: unknown): unknown {
  const delivery = isObject(raw) ? raw.webhookDelivery : undefined;
  if (!isObject(delivery) || !('reloadDebounceMs' in delivery)) return raw;
  if ('pageReloadDebounceMs' in delivery) {
    throw new ConfigError('invalid config at webhookDelivery.reloadDebounceMs: deprecated name of pageReloadDebounceMs; give pageReloadDebounceMs only');
  }
  const { reloadDebounceMs, ...rest } = delivery;
  return { ...(raw as Record<string, unknown>), webhookDelivery: { ...rest, pageReloadDebounceMs: reloadDebounceMs } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `line L, column C` where `text` stops being JSON. */
function jsonWhere(text: string): string {
  const { line, column } = lineAndColumn(text, jsonErrorOffset(text));
  return `line ${line}, column ${column}`;
}

function adminOf(raw: Record<string, unknown>): Record<string, unknown> {
  return objectField(raw, 'admin');
}

/** `raw[name]` when it is a JSON object, else an empty one. */
function objectField(raw: Record<string, unknown>, name: string): Record<string, unknown> {
  const value = raw[name];
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function checkUnique(values: string[], list: string, field: string): void {
  const seen = new Set<string>();
  values.forEach((v, i) => {
    if (seen.has(v)) throw new ConfigError(`invalid config at ${list}.${i}.${field}: duplicate value "${v}"`);
    seen.add(v);
  });
}

function envInteger(name: string, value: string): number {
  const n = z.coerce.number().int().safeParse(value);
  if (!n.success) throw new ConfigError(`environment variable ${name} must be an integer, got "${value}"`);
  return n.data;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** 127.0.0.0/8, ::1 and localhost: addresses only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || host.startsWith('127.');
}
