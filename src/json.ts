/** JSON helpers shared by every area (main thread and shards). */
import { jsonErrorOffset } from './config/json-position.js';

/** A plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Why bytes are not a JSON object: not UTF-8, not JSON (the parser's message), or JSON of another kind. */
export type JsonObjectFailure = { why: 'utf8' } | { why: 'syntax'; message: string } | { why: 'not-object'; value: unknown };

/**
 * Reads a request body that must be a JSON object (strict UTF-8). Answers the object or why
 * not; each API turns the failure into its own catalogue error and wording.
 */
export function decodeJsonObject(body: Uint8Array): { ok: true; value: Record<string, unknown> } | ({ ok: false } & JsonObjectFailure) {
  let text: string;
  try {
    text = strictUtf8.decode(body);
  } catch {
    return { ok: false, why: 'utf8' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, why: 'syntax', message: jsonSyntaxReason(err, text) };
  }
  return isObject(value) ? { ok: true, value } : { ok: false, why: 'not-object', value };
}

/**
 * Why JSON.parse refused `text`, without quoting it: V8 quotes an excerpt of the text in some
 * messages (`Unexpected token 's', "secret=abc"... is not valid JSON`), and the text may be a
 * secret (a key file, a request body with credentials). Those become the position only.
 */
export function jsonSyntaxReason(err: unknown, text: string): string {
  const message = err instanceof Error ? err.message : '';
  if (message !== '' && !message.includes('"')) return message;
  let offset: number;
  try {
    offset = jsonErrorOffset(text);
  } catch {
    // Nested past the stack (the finder recurses): the position is not worth a failure.
    return 'Unexpected character in JSON';
  }
  return `Unexpected character in JSON at position ${offset}`;
}
