/**
 * One webhook POST with node's fetch (undici), bounded by a timeout, and the retry delay that
 * follows a failure. Runs in the shard worker, never on the main thread.
 */

/** A request ready to send: exact body bytes and every header. */
export interface WebhookRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** 2xx is delivered; anything else (status, timeout, network error) is a failed attempt. */
export type DeliveryResult =
  | { ok: true; status: number }
  | { ok: false; status?: number; error: string; retryAfterMs?: number };

/** Longest single retry delay (ms), whatever the attempt number or Retry-After. */
export const MAX_RETRY_DELAY_MS = 10 * 60_000;

/** Bytes of a receiver's answer read (and thrown away) so the connection can be reused. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * POSTs the request. Redirects are not followed (a 3xx is a failure: a webhook receiver
 * answers 2xx). Never throws: every failure is a DeliveryResult.
 */
export async function postWebhook(req: WebhookRequest, timeoutMs: number, closeSignal: AbortSignal): Promise<DeliveryResult> {
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), closeSignal]);
  try {
    const { url, authorization } = splitCredentials(req.url);
    const headers = authorization ? { ...req.headers, Authorization: authorization } : req.headers;
    const res = await fetch(url, { method: 'POST', body: req.body, headers, redirect: 'manual', signal });
    await drain(res);
    if (res.status >= 200 && res.status <= 299) return { ok: true, status: res.status };
    const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'), Date.now());
    return { ok: false, status: res.status, error: `HTTP ${res.status}`, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  } catch (err) {
    if (signal.aborted && !closeSignal.aborted) return { ok: false, error: `timeout after ${timeoutMs} ms` };
    return { ok: false, error: describe(err) };
  }
}

/**
 * Delay (ms) before the next attempt after `attempts` failed ones: `baseMs · 2^(attempts-1)`
 * with equal jitter (between half and all of it), at least the receiver's Retry-After, at
 * most MAX_RETRY_DELAY_MS.
 */
export function retryDelayMs(attempts: number, baseMs: number, random: () => number = Math.random, retryAfterMs?: number): number {
  const exp = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  const jittered = exp / 2 + random() * (exp / 2);
  return Math.round(Math.min(MAX_RETRY_DELAY_MS, Math.max(jittered, retryAfterMs ?? 0)));
}

/** Retry-After as seconds or an HTTP date, in ms from `nowMs`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/**
 * fetch refuses URLs with credentials: `https://user:pass@host/` becomes the bare URL plus an
 * `Authorization: Basic` header, as receivers behind basic auth expect.
 */
export function splitCredentials(raw: string): { url: string; authorization?: string } {
  const parsed = new URL(raw);
  if (!parsed.username && !parsed.password) return { url: raw };
  const user = decodeURIComponent(parsed.username);
  const pass = decodeURIComponent(parsed.password);
  parsed.username = '';
  parsed.password = '';
  return { url: parsed.toString(), authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` };
}

/** The URL for logs and dead-letter warnings: any password replaced by `***`. */
export function redactUrl(raw: string): string {
  try {
    const parsed = new URL(raw);
    if (!parsed.password) return raw;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

async function drain(res: Response): Promise<void> {
  if (!res.body) return;
  let read = 0;
  try {
    for await (const chunk of res.body) {
      read += (chunk as Uint8Array).byteLength;
      if (read > MAX_ANSWER_BYTES) break;
    }
  } catch {
    // The answer's status is what counts; a broken body does not change it.
  }
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return cause ? `${e.message ?? 'fetch failed'} (${cause})` : String(e?.message ?? err);
}
