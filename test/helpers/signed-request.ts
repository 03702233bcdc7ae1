/**
 * The query string of a Channels HTTP API request signed by hand, as the spec says (so tests
 * can send what the official SDK never would: stale timestamps, wrong body_md5, bad signatures).
 */
import { createHash, createHmac } from 'node:crypto';
import type { ChannelsCreds } from './sdk-clients.js';

/** What signedQuery() signs besides the auth parameters, and the overrides it allows. */
export interface SignOptions {
  /** Query parameters besides the auth ones; arrays are written key[]=v. */
  params?: Record<string, string | string[]>;
  body?: string;
  /** Seconds since the epoch; now when absent. */
  timestamp?: number;
  /** Overrides body_md5 (null leaves it out). */
  bodyMd5?: string | null;
  signature?: string;
}

/**
 * `auth_key`, `auth_timestamp`, `auth_version`, `body_md5` (of a non-empty body), the other
 * params and `auth_signature`, sorted and signed; values are URL-escaped in the query, not in
 * the signed string.
 */
export function signedQuery(creds: ChannelsCreds, method: 'GET' | 'POST', path: string, opts: SignOptions = {}): string {
  const pairs: [string, string][] = [
    ['auth_key', creds.key],
    ['auth_timestamp', String(opts.timestamp ?? Math.floor(Date.now() / 1000))],
    ['auth_version', '1.0'],
  ];
  const md5 = opts.bodyMd5 === undefined ? (opts.body ? createHash('md5').update(opts.body).digest('hex') : undefined) : opts.bodyMd5;
  if (md5 !== undefined && md5 !== null) pairs.push(['body_md5', md5]);
  for (const [k, v] of Object.entries(opts.params ?? {})) {
    if (Array.isArray(v)) for (const item of v) pairs.push([`${k}[]`, item]);
    else pairs.push([k, v]);
  }
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const toSign = `${method}\n${path}\n${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`;
  const signature = opts.signature ?? createHmac('sha256', creds.secret).update(toSign).digest('hex');
  return [...pairs, ['auth_signature', signature]].map(([k, v]) => `${k}=${encodeURIComponent(v!)}`).join('&');
}
