/**
 * One webhook POST with node:http / node:https over keep-alive agents, bounded by a timeout,
 * and the retry delay that follows a failure. Runs in the shard worker, never on the main thread.
 *
 * Receivers named in the config file are the operator's own and are connected to wherever they
 * are. A per-publish `webhookUrl` comes with a publish request: its connections go through an
 * OutboundGuard (net/outbound-guard.ts), which lets them reach public addresses only (and
 * `outbound.allowPrivateAddresses`), checked on the address connected to.
 */
import http from 'node:http';
import https from 'node:https';
import { OutboundAddressRefused, OutboundGuard } from '../net/outbound-guard.js';
import { countOutboundRefusal } from '../shards/shard-counters.js';

/** A request ready to send: exact body bytes and every header. */
export interface WebhookRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/**
 * 2xx is delivered; anything else (status, timeout, network error) is a failed attempt.
 * `final`: retrying cannot help (the address is refused): dead-letter at once.
 */
export type DeliveryResult =
  | { ok: true; status: number }
  | { ok: false; status?: number; error: string; retryAfterMs?: number; final?: true };

/** Longest single retry delay (ms), whatever the attempt number or Retry-After. */
export const MAX_RETRY_DELAY_MS = 10 * 60_000;

/** Bytes of a receiver's answer read (and thrown away) so the connection can be reused. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Sends webhook requests; one per outbox (shard), closed with it. */
export class WebhookSender {
  readonly #guard: OutboundGuard;
  /** Agents for receivers from the config file, and guarded ones for per-publish URLs. */
  readonly #agents: { http: http.Agent; https: https.Agent; guardedHttp: http.Agent; guardedHttps: https.Agent };

  constructor(allowPrivateAddresses: readonly string[] = []) {
    this.#guard = new OutboundGuard({ allowPrivateAddresses, onRefused: (reason) => countOutboundRefusal('webhook', reason) });
    const guarded = { keepAlive: true, lookup: this.#guard.lookup };
    this.#agents = {
      http: new http.Agent({ keepAlive: true }),
      https: new https.Agent({ keepAlive: true }),
      guardedHttp: new http.Agent(guarded),
      guardedHttps: new https.Agent(guarded),
    };
  }

  /**
   * POSTs the request; `guarded` for URLs that did not come from the config file. Redirects are
   * not followed (a 3xx is a failure: a webhook receiver answers 2xx). Never throws: every
   * failure is a DeliveryResult.
   */
  async post(req: WebhookRequest, guarded: boolean, timeoutMs: number, closeSignal: AbortSignal): Promise<DeliveryResult> {
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), closeSignal]);
    try {
      const { url, authorization } = splitCredentials(req.url);
      const target = new URL(url);
      if (guarded) this.#guard.checkHost(target.hostname);
      const headers = authorization ? { ...req.headers, Authorization: authorization } : req.headers;
      const secure = target.protocol === 'https:';
      const agent = guarded ? (secure ? this.#agents.guardedHttps : this.#agents.guardedHttp) : secure ? this.#agents.https : this.#agents.http;
      const res = await send(secure ? https : http, target, agent, req.body, headers, signal);
      if (res.status >= 200 && res.status <= 299) return { ok: true, status: res.status };
      const retryAfterMs = parseRetryAfter(res.retryAfter ?? null, Date.now());
      return { ok: false, status: res.status, error: `HTTP ${res.status}`, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    } catch (err) {
      if (err instanceof OutboundAddressRefused) return { ok: false, error: `refused: ${err.message}`, final: true };
      if (signal.aborted && !closeSignal.aborted) return { ok: false, error: `timeout after ${timeoutMs} ms` };
      return { ok: false, error: describe(err) };
    }
  }

  close(): void {
    for (const agent of Object.values(this.#agents)) agent.destroy();
  }
}

/** One POST; resolves with the status once the answer is read (up to MAX_ANSWER_BYTES). */
function send(
  module: typeof http | typeof https,
  url: URL,
  agent: http.Agent,
  body: string,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const request = module.request(url, {
      method: 'POST',
      agent,
      signal,
      headers: { 'content-length': String(Buffer.byteLength(body)), ...headers },
    }, (res) => {
      // The answer's status is what counts; its body is read (bounded) so the socket is reused.
      let read = 0;
      const done = (): void => resolve({ status: res.statusCode ?? 0, retryAfter: headerValue(res.headers['retry-after']) });
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) {
          res.destroy();
          done();
        }
      });
      res.on('end', done);
      res.on('error', done);
    });
    request.on('error', reject);
    request.end(body);
  });
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
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
 * `https://user:pass@host/` becomes the bare URL plus an `Authorization: Basic` header, as
 * receivers behind basic auth expect.
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

function describe(err: unknown): string {
  const e = err as { message?: string; code?: string };
  return e?.code && !String(e.message).includes(e.code) ? `${e.message} (${e.code})` : String(e?.message ?? err);
}
