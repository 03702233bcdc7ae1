/**
 * Parameters of channel API requests: the query string (as signed), the JSON body, and the
 * zod shapes of the trigger (C1) and batch (C2) bodies. Only shape lives here; the rules
 * that need the app (data size, batch size, quota) are applied by the handlers.
 */
import { z } from 'zod';
import { HeraldError } from '../../errors.js';
import { decodeJsonObject } from '../../json.js';

/** One `key=value` of the query string, both URL-decoded, in the order received. */
export type QueryPair = readonly [key: string, value: string];

/** Query keys that authenticate the request and are never request parameters. */
export const AUTH_PARAM_KEYS: ReadonlySet<string> = new Set(['auth_key', 'auth_timestamp', 'auth_version', 'auth_signature', 'body_md5']);

/** Largest event name, characters. */
export const MAX_EVENT_NAME_LENGTH = 200;
/** Channels one C1 trigger may name. */
export const MAX_CHANNELS_PER_EVENT = 100;

/**
 * `s.toLowerCase()`, without a new string when nothing changes: query keys (and hex digests) arrive lower-case,
 * and toLowerCase copies even then.
 */
export function lowerCased(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c >= 65 && c <= 90) || c > 127) return s.toLowerCase();
  }
  return s;
}

/** The authentication keys, as the one string each that parseQueryPairs hands out for them. */
const KNOWN_KEYS: readonly string[] = [...AUTH_PARAM_KEYS];

/**
 * The key `query[start, end)`: an authentication key as its constant (no copy, and compared
 * and hashed as the same string every time), any other key decoded.
 */
function keyAt(query: string, start: number, end: number): string {
  const length = end - start;
  for (let i = 0; i < KNOWN_KEYS.length; i++) {
    const known = KNOWN_KEYS[i]!;
    if (known.length === length && query.startsWith(known, start)) return known;
  }
  return decodeComponent(query.slice(start, end));
}

/**
 * Splits a raw query string into decoded pairs. `+` reads as a space (form encoding, as the
 * SDKs that escape their query strings write it); a malformed escape is kept as written.
 */
export function parseQueryPairs(query: string): QueryPair[] {
  const pairs: QueryPair[] = [];
  const length = query.length;
  let start = 0;
  while (start < length) {
    let end = query.indexOf('&', start);
    if (end === -1) end = length;
    if (end > start) {
      const eq = query.indexOf('=', start);
      pairs.push(eq === -1 || eq > end ? [keyAt(query, start, end), ''] : [keyAt(query, start, eq), decodeComponent(query.slice(eq + 1, end))]);
    }
    start = end + 1;
  }
  return pairs;
}

function decodeComponent(s: string): string {
  if (!s.includes('%') && !s.includes('+')) return s;
  const spaced = s.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/**
 * Request parameters carried in the query string, keys lower-cased, authentication keys
 * left out. `key[]=a&key[]=b` gives `key: ['a', 'b']`; a repeated plain key keeps its last value.
 */
export function queryParams(pairs: readonly QueryPair[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [rawKey, value] of pairs) {
    const key = rawKey.toLowerCase();
    if (AUTH_PARAM_KEYS.has(key)) continue;
    if (key.endsWith('[]')) {
      const name = key.slice(0, -2);
      const prev = out[name];
      out[name] = Array.isArray(prev) ? [...prev, value] : [value];
    } else {
      out[key] = value;
    }
  }
  return out;
}

/** The JSON object body of a POST; an empty body is `{}`. */
export function parseJsonObjectBody(body: Buffer): Record<string, unknown> {
  if (body.length === 0) return {};
  const read = decodeJsonObject(body);
  if (read.ok) return read.value;
  if (read.why === 'utf8') throw new HeraldError('INVALID_UTF8');
  if (read.why === 'syntax') throw new HeraldError('INVALID_JSON', `Request body is not valid JSON: ${read.message}`);
  throw new HeraldError('INVALID_JSON', 'Request body must be a JSON object');
}

/** POST parameters: the query-string ones, overridden field by field by the JSON body. */
export function postParams(pairs: readonly QueryPair[], body: Buffer): Record<string, unknown> {
  const fromBody = parseJsonObjectBody(body);
  // The usual request carries only authentication in its query: the parsed body (a fresh
  // object) already is the answer, no copy needed.
  for (let i = 0; i < pairs.length; i++) {
    if (!AUTH_PARAM_KEYS.has(lowerCased(pairs[i]![0]))) return { ...queryParams(pairs), ...fromBody };
  }
  return fromBody;
}

/** The parameters a route accepts besides authentication; anything else is a 400. */
export function rejectUnexpectedParams(params: Record<string, unknown>, allowed: readonly string[], route: string): void {
  const unexpected = Object.keys(params).filter((k) => !allowed.includes(k));
  if (unexpected.length > 0) {
    const accepts = allowed.length === 0 ? 'takes no parameters' : `accepts only ${allowed.join(', ')}`;
    throw new HeraldError('INVALID_PARAMETERS', `${route} ${accepts}; got ${unexpected.join(', ')}`);
  }
}

const str = z.string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') });
const optStr = z.string({ error: 'must be a string' }).optional();

const eventName = str
  .min(1, 'must not be empty')
  .max(MAX_EVENT_NAME_LENGTH, `must be at most ${MAX_EVENT_NAME_LENGTH} characters`);

/** C1 body (POST /apps/:id/events). `channels` may be a single string when it came from `channels=` in a query. */
export const triggerSchema = z.object({
  name: eventName,
  /** A string, typically JSON-encoded; relayed exactly as given. */
  data: str,
  channels: z
    .preprocess(
      (v) => (typeof v === 'string' ? [v] : v),
      z
        .array(z.string({ error: 'must be a string' }), { error: 'must be an array of channel names' })
        .min(1, 'must name at least one channel')
        .max(MAX_CHANNELS_PER_EVENT, `may name at most ${MAX_CHANNELS_PER_EVENT} channels`),
    )
    .optional(),
  channel: optStr,
  socket_id: optStr,
  info: optStr,
});
export type TriggerParams = z.infer<typeof triggerSchema>;

/** One event of a C2 batch (an element of `batch`): a C1 body with one `channel`. */
export const batchEventSchema = z.object({
  name: eventName,
  data: str,
  channel: str,
  socket_id: optStr,
  info: optStr,
});
export type BatchEventParams = z.infer<typeof batchEventSchema>;

/** C2 body. The per-app limit on its length is checked by the handler. */
export const batchSchema = z.object({
  batch: z.array(z.unknown(), { error: (iss) => (iss.input === undefined ? 'is required' : 'must be an array of events') }),
});

/**
 * The C1 parameters, as `parseWith(triggerSchema, value)` gives them. The common shape is
 * checked by hand (a few typeof tests instead of a zod parse); anything else, valid or not,
 * goes through zod, so answers and error messages are zod's.
 */
export function parseTriggerParams(value: Record<string, unknown>): TriggerParams {
  return triggerFastPath(value) ?? parseWith(triggerSchema, value);
}

function isOptionalString(v: unknown): v is string | undefined {
  return v === undefined || typeof v === 'string';
}

function isEventName(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_EVENT_NAME_LENGTH;
}

/** The trigger when it has the common, valid shape; undefined sends it to zod. */
function triggerFastPath(value: Record<string, unknown>): TriggerParams | undefined {
  const { name, data, channel, socket_id: socketId, info } = value;
  let channels = value.channels;
  if (!isEventName(name) || typeof data !== 'string' || !isOptionalString(channel) || !isOptionalString(socketId) || !isOptionalString(info)) {
    return undefined;
  }
  if (typeof channels === 'string') {
    channels = [channels];
  } else if (channels !== undefined) {
    if (!Array.isArray(channels) || channels.length === 0 || channels.length > MAX_CHANNELS_PER_EVENT) return undefined;
    for (let i = 0; i < channels.length; i++) if (typeof channels[i] !== 'string') return undefined;
  }
  const out: TriggerParams = { name, data };
  if (channels !== undefined) out.channels = channels as string[];
  if (channel !== undefined) out.channel = channel;
  if (socketId !== undefined) out.socket_id = socketId;
  if (info !== undefined) out.info = info;
  return out;
}

/** The C2 body, as `parseWith(batchSchema, value)` gives it (zod only when `batch` is not an array). */
export function parseBatchParams(value: Record<string, unknown>): { batch: unknown[] } {
  const batch = value.batch;
  return Array.isArray(batch) ? { batch } : parseWith(batchSchema, value);
}

/** One C2 event, as `parseWith(batchEventSchema, raw, \`batch[${index}]\`)` gives it (hand-checked common shape, else zod). */
export function parseBatchEventParams(raw: unknown, index: number): BatchEventParams {
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const { name, data, channel, socket_id: socketId, info } = raw as Record<string, unknown>;
    if (isEventName(name) && typeof data === 'string' && typeof channel === 'string' && isOptionalString(socketId) && isOptionalString(info)) {
      const out: BatchEventParams = { name, data, channel };
      if (socketId !== undefined) out.socket_id = socketId;
      if (info !== undefined) out.info = info;
      return out;
    }
  }
  return parseWith(batchEventSchema, raw, `batch[${index}]`);
}

/**
 * Parses with a zod schema; a mismatch is a 400 naming the first bad field, e.g.
 * `batch[2].channel is required`. `where` prefixes the path (the batch index).
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = where + issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
  throw new HeraldError('INVALID_PARAMETERS', `${path.replace(/^\./, '') || 'body'} ${issue.message}`);
}

/** The info attributes a request may name; each endpoint accepts a subset (parseInfo). */
export type InfoAttribute = 'user_count' | 'subscription_count' | 'cache';

/**
 * Splits a comma-separated `info` value into attribute names; names outside `accepted` are
 * a 400 that lists what the endpoint accepts. Absent or empty gives an empty set.
 */
export function parseInfo(info: string | undefined, accepted: readonly InfoAttribute[], where: string): Set<InfoAttribute> {
  const out = new Set<InfoAttribute>();
  if (info === undefined) return out;
  for (const raw of info.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    if (!(accepted as readonly string[]).includes(name)) {
      throw new HeraldError('INVALID_PARAMETERS', `${where}: unknown info attribute '${name}'; accepted here: ${accepted.join(', ')}`);
    }
    out.add(name as InfoAttribute);
  }
  return out;
}
