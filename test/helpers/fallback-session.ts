/**
 * pusher-js' HTTP fallback session protocol spoken by hand over fetch (polling): session
 * paths, the lines of an answer parsed (`o`, `h`, `a[…]`, `c[…]`), polls and sends; and the
 * same from another client address (a socket bound to another loopback address, or an
 * X-Forwarded-For) with node:http.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { request as httpRequest, type Agent, type RequestOptions } from 'node:http';
import { expect } from 'vitest';
import { untilBackToBack } from './wait.js';

export const FALLBACK_QUERY = '?protocol=7&client=js&version=8.6.0';

let sequence = 0;

/** A fresh session path on `baseUrl` for app `key`, as pusher-js makes them (`<server>/<session>`). */
export function sessionBase(baseUrl: string, key: string): string {
  sequence++;
  return `${baseUrl}/pusher/app/${key}/${sequence % 1000}/s${sequence.toString(36)}x${Math.random().toString(36).slice(2, 8)}`;
}

export interface Lines {
  opened: boolean;
  frames: Array<{ event: string; channel?: string; data?: unknown; user_id?: string }>;
  close: [number, string] | null;
  heartbeats: number;
  raw: string;
}

export function parseLines(text: string): Lines {
  const out: Lines = { opened: false, frames: [], close: null, heartbeats: 0, raw: text };
  for (const line of text.split('\n')) {
    if (line === 'o') out.opened = true;
    else if (line === 'h') out.heartbeats++;
    else if (line.startsWith('a')) for (const f of JSON.parse(line.slice(1)) as string[]) out.frames.push(JSON.parse(f) as Lines['frames'][number]);
    else if (line.startsWith('c')) out.close = JSON.parse(line.slice(1)) as [number, string];
  }
  return out;
}

/** One poll (`xhr`): what it was answered. */
export async function poll(base: string): Promise<Lines> {
  const res = await fetch(`${base}/xhr${FALLBACK_QUERY}`, { method: 'POST' });
  expect(res.status).toBe(200);
  expect(res.headers.get('access-control-allow-origin')).toBe('*');
  return parseLines(await res.text());
}

/**
 * Polls (`base` may name a different node for each poll) until `done` holds for everything
 * received (15 s at most); returns all of it. `each` sees every poll's answer first, with what
 * came before it; an assertion failing in a poll or in `each` fails at once.
 */
export async function pollUntil(base: string | (() => string), done: (l: Lines) => boolean, each?: (l: Lines, before: Lines) => void): Promise<Lines> {
  const all: Lines = { opened: false, frames: [], close: null, heartbeats: 0, raw: '' };
  let failed: { error: unknown } | undefined;
  await untilBackToBack(
    async () => {
      if (done(all)) return true;
      try {
        const l = await poll(typeof base === 'string' ? base : base());
        each?.(l, all);
        all.frames.push(...l.frames);
        all.close ??= l.close;
        all.raw += l.raw;
        all.opened ||= l.opened;
      } catch (error) {
        failed = { error };
        return true;
      }
      return done(all);
    },
    () => `polls to receive it; got ${all.raw.slice(0, 2000)}`,
    15_000,
  );
  if (failed) throw failed.error;
  return all;
}

/** `xhr_send` of `messages` (each JSON-encoded into the array, as pusher-js does). */
export function send(base: string, messages: unknown[]): Promise<Response> {
  return fetch(`${base}/xhr_send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(messages.map((m) => JSON.stringify(m))) });
}

/** Opens a session by polling; answers its socket id. */
export async function connectSession(base: string): Promise<string> {
  const first = await pollUntil(base, (l) => l.frames.some((f) => f.event === 'pusher:connection_established') || l.close !== null);
  expect(first.opened).toBe(true);
  const established = first.frames.find((f) => f.event === 'pusher:connection_established');
  expect(established, first.raw).toBeDefined();
  return (JSON.parse(established!.data as string) as { socket_id: string }).socket_id;
}

/**
 * Where a request comes from: the loopback address its socket binds to (127.0.0.2, ... stand
 * for other clients) and the X-Forwarded-For it carries (a proxy's word about the client).
 */
export interface From {
  readonly localAddress?: string;
  readonly forwardedFor?: string;
  /** The connections it goes over (a keep-alive agent: one connection, on a known front-end thread); a new connection of its own otherwise. */
  readonly agent?: Agent;
}

export interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

function postOptions(url: string, from: From, body: string | undefined): RequestOptions {
  const u = new URL(url);
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (from.forwardedFor !== undefined) headers['x-forwarded-for'] = from.forwardedFor;
  return { host: u.hostname, port: u.port, path: `${u.pathname}${u.search}`, method: 'POST', headers, localAddress: from.localAddress, agent: from.agent ?? false };
}

/** One POST to a session route from `from`, read to its end; rejects when no answer ends within `timeoutMs`. */
export function postFrom(url: string, from: From, body?: string, timeoutMs = 15_000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(postOptions(url, from, body), (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer to ${url} within ${timeoutMs} ms`)));
    req.end(body);
  });
}

/** `xhr_send` of `messages` from `from`. */
export function sendFrom(base: string, from: From, messages: unknown[]): Promise<Answer> {
  return postFrom(`${base}/xhr_send`, from, JSON.stringify(messages.map((m) => JSON.stringify(m))));
}

/** One poll (`xhr`) from `from`: its status and lines. */
export async function pollFrom(base: string, from: From): Promise<Answer & { lines: Lines }> {
  const answer = await postFrom(`${base}/xhr${FALLBACK_QUERY}`, from);
  return { ...answer, lines: parseLines(answer.status === 200 ? answer.text : '') };
}

/** An open `xhr_streaming` response: what it has received so far, and whether it ended. */
export interface OpenStream {
  readonly status: Promise<number>;
  text(): string;
  lines(): Lines;
  readonly ended: () => boolean;
  close(): void;
}

/** Opens a stream (`xhr_streaming`) from `from`; it is read as it arrives. */
export function openStream(base: string, from: From = {}): OpenStream {
  let text = '';
  let ended = false;
  let settle: (status: number) => void = () => undefined;
  const status = new Promise<number>((resolve) => (settle = resolve));
  const req = httpRequest(postOptions(`${base}/xhr_streaming${FALLBACK_QUERY}`, from, undefined), (res) => {
    settle(res.statusCode ?? 0);
    res.on('data', (c: Buffer) => (text += c.toString('utf8')));
    res.on('end', () => (ended = true));
    res.on('error', () => (ended = true));
    res.on('close', () => (ended = true));
  });
  req.on('error', () => {
    ended = true;
    settle(0);
  });
  req.end();
  return { status, text: () => text, lines: () => parseLines(text.slice(0, text.lastIndexOf('\n') + 1)), ended: () => ended, close: () => req.destroy() };
}
