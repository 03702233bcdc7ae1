/**
 * Structured logs with pino: one JSON line per event on stderr (human-readable when stderr is
 * a terminal), fields `time` (ISO 8601), `level` (label), `msg`, then the event's own fields
 * (docs/operations.md lists the stable ones). The level comes from the config (`logLevel`)
 * and HERALD_LOG_LEVEL, which wins; workers set theirs from the config they are given.
 *
 * Never pass secrets (app secrets, push secret keys, tokens, private keys) in `fields`:
 * nothing here knows them. One kind is masked here, in the message and in every string field:
 * a query-style `token=<value>` (and `secret=`, `password=`, `signature=`), which a client can
 * put into anything that is logged (a request target, an app key, a route parameter).
 */
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { isMainThread } from 'node:worker_threads';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value);
}

function envLevel(): LogLevel {
  const value = process.env.HERALD_LOG_LEVEL;
  return isLogLevel(value) ? value : 'info';
}

function createLogger(): Logger {
  const options = {
    level: envLevel(),
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  // Pretty output only for a person at a terminal, and only on the main thread (workers share
  // the same stderr; a synchronous JSON stream keeps their lines whole).
  if (process.stderr.isTTY && isMainThread) {
    return pino(options, pretty({ destination: 2, sync: true, colorize: true, translateTime: 'SYS:HH:MM:ss.l' }));
  }
  // The main thread writes through process.stderr (synchronous for files and pipes; what
  // embedders and tests intercept); a worker writes fd 2 directly and synchronously, so its
  // last lines are not lost in the hop to the main thread when it dies.
  return pino(options, isMainThread ? process.stderr : pino.destination({ fd: 2, sync: true }));
}

const logger = createLogger();

/** Sets the threshold; HERALD_LOG_LEVEL, when set, wins over the config's `logLevel`. */
export function setLogLevel(configLevel: LogLevel): void {
  const fromEnv = process.env.HERALD_LOG_LEVEL;
  logger.level = isLogLevel(fromEnv) ? fromEnv : configLevel;
}

export function logLevelEnabled(level: LogLevel): boolean {
  return logger.isLevelEnabled(level);
}

type Fields = Record<string, unknown>;

/** A thrown value as a log field or message: an error's stack (its first line is the message), anything else as text. */
export function describeError(err: unknown): string {
  return String((err as Error)?.stack ?? err);
}

/**
 * `name=value` whose name ends in token, secret, password or signature (`token=`,
 * `access_token=`, `auth_signature=`), `=` also URL-encoded (`%3D`). The value runs to the next
 * white space: a token may hold `&`, `#` or quotes, and a longer mask costs only context.
 */
const SECRET_PARAM = /((?:token|secret|password|signature)(?:=|%3D))\S*/gi;
const HAS_SECRET_PARAM = /(?:token|secret|password|signature)(?:=|%3D)/i;
/** Nesting of fields searched; deeper values are logged as they are. */
const MASK_DEPTH = 4;

/** `text` with the value of every `token=…` (see SECRET_PARAM) replaced by `***`. */
export function maskSecretParams(text: string): string {
  return HAS_SECRET_PARAM.test(text) ? text.replace(SECRET_PARAM, '$1***') : text;
}

/** The value with maskSecretParams applied to every string in it; the same object when none needed it. */
function maskValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return maskSecretParams(value);
  if (depth >= MASK_DEPTH || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    const text = describeError(value);
    return HAS_SECRET_PARAM.test(text) ? maskSecretParams(text) : value;
  }
  if (Array.isArray(value)) {
    const masked = value.map((v) => maskValue(v, depth + 1));
    return masked.some((v, i) => v !== value[i]) ? masked : value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const masked = maskValue(v, depth + 1);
    if (masked !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = masked;
  }
  return copy ?? value;
}

function masked(fields: Fields | undefined): Fields {
  return fields === undefined ? {} : (maskValue(fields, 0) as Fields);
}

export const log = {
  debug: (msg: string, fields?: Fields): void => {
    if (logger.isLevelEnabled('debug')) logger.debug(masked(fields), maskSecretParams(msg));
  },
  info: (msg: string, fields?: Fields): void => logger.info(masked(fields), maskSecretParams(msg)),
  warn: (msg: string, fields?: Fields): void => logger.warn(masked(fields), maskSecretParams(msg)),
  error: (msg: string, fields?: Fields): void => logger.error(masked(fields), maskSecretParams(msg)),
};

/**
 * A log line that may repeat in floods (refused connections, auth failures, gateway errors):
 * the first one per `key` in each interval is written; the others are counted and reported
 * once, as `suppressed`, with the next line written for that key.
 */
export class RateLimitedLog {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly level: LogLevel,
    private readonly intervalMs = 10_000,
    /** Distinct keys remembered; beyond it the oldest are forgotten. */
    private readonly maxKeys = 1000,
    /** Where lines go (tests); the logger by default. */
    private readonly emit: (msg: string, fields: Fields | undefined) => void = (msg, fields) => log[level](msg, fields),
    private readonly now: () => number = Date.now,
  ) {}

  write(key: string, msg: string, fields?: Fields): void {
    if (!logger.isLevelEnabled(this.level)) return;
    const now = this.now();
    const entry = this.last.get(key);
    if (entry && now - entry.at < this.intervalMs) {
      entry.suppressed++;
      return;
    }
    const suppressed = entry?.suppressed ?? 0;
    if (!entry && this.last.size >= this.maxKeys) {
      const oldest = this.last.keys().next().value;
      if (oldest !== undefined) this.last.delete(oldest);
    }
    this.last.delete(key);
    this.last.set(key, { at: now, suppressed: 0 });
    this.emit(msg, suppressed > 0 ? { ...fields, suppressed } : fields);
  }
}
