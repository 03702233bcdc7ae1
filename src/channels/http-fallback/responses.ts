/**
 * The HTTP answers of the fallback routes, every one with CORS headers (pusher-js'
 * `Content-Type: application/json` POSTs are preflighted): a stream's or a poll's lines, the
 * 204 of an xhr_send, an error from the catalogue, the preflight, and the receiver (session.ts)
 * that writes a session's lines to a stream or a poll on this node.
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { HeraldError, channelErrorBody } from '../../errors.js';
import { PREFLIGHT_MAX_AGE_SECONDS } from '../../http/cors.js';
import { statusLine } from '../../http/uws-http.js';
import { log } from '../../log.js';
import type { Receiver } from './session.js';

const CORS_HEADERS: readonly (readonly [string, string])[] = [
  ['access-control-allow-origin', '*'],
  ['cache-control', 'no-store'],
];

/** How long (s) a client is told to wait when the session directory cannot be read. */
const DIRECTORY_RETRY_AFTER_SECONDS = 1;

/** The content type of the session lines (a stream's or a poll's). */
const LINES = 'application/javascript; charset=UTF-8';

export function writeHead(res: HttpResponse, status: number, contentType: string): void {
  res.writeStatus(statusLine(status));
  res.writeHeader('content-type', contentType);
  for (const [k, v] of CORS_HEADERS) res.writeHeader(k, v);
}

/** A poll's one answer: status, headers and its lines. */
export function answerPoll(res: HttpResponse, body: string): void {
  res.cork(() => {
    writeHead(res, 200, LINES);
    res.end(body);
  });
}

/** A stream's head and its first line (`o` for a new session, else a heartbeat); the stream stays open. */
export function startStream(res: HttpResponse, firstLine: string): void {
  res.cork(() => {
    writeHead(res, 200, LINES);
    res.writeHeader('x-accel-buffering', 'no');
    res.write(firstLine);
  });
}

export function answerError(res: HttpResponse, err: HeraldError, closeConnection = false): void {
  res.cork(() => {
    writeHead(res, err.status, 'application/json');
    if (err.retryAfterSeconds !== undefined) res.writeHeader('retry-after', String(err.retryAfterSeconds));
    res.end(channelErrorBody(err), closeConnection);
  });
}

/**
 * The directory could not be read or written (Redis away): nothing was opened or relayed;
 * pusher-js takes the 503 as an interrupted connection and reconnects.
 */
export function answerRetry(res: HttpResponse, err: unknown): void {
  log.debug('http fallback: session directory unavailable', { error: String(err) });
  const retry = new HeraldError('CLUSTER_UNAVAILABLE');
  retry.retryAfterSeconds = DIRECTORY_RETRY_AFTER_SECONDS;
  answerError(res, retry);
}

/** An xhr_send taken. */
export function answerSent(res: HttpResponse): void {
  res.cork(() => {
    res.writeStatus('204 No Content');
    for (const [k, v] of CORS_HEADERS) res.writeHeader(k, v);
    res.end();
  });
}

export function preflight(res: HttpResponse, req: HttpRequest): void {
  const requested = req.getHeader('access-control-request-headers');
  res.cork(() => {
    res.writeStatus('204 No Content');
    res.writeHeader('access-control-allow-origin', '*');
    res.writeHeader('access-control-allow-methods', 'POST, OPTIONS');
    res.writeHeader('access-control-allow-headers', requested === '' ? 'Content-Type' : requested.slice(0, 1000));
    res.writeHeader('access-control-max-age', String(PREFLIGHT_MAX_AGE_SECONDS));
    res.end();
  });
}

/** The receiver of a stream or a poll on this node (epoch ms `now`): it writes the session's lines to `res`. */
export function responseReceiver(res: HttpResponse, stream: boolean, now: number): Receiver {
  return {
    stream,
    blocked: false,
    lastWriteMs: now,
    openedMs: now,
    write: (lines) => {
      let ok = true;
      res.cork(() => {
        ok = res.write(lines);
      });
      return ok;
    },
    finish: (lines) => {
      if (stream) res.cork(() => res.end(lines));
      else answerPoll(res, lines);
    },
  };
}
