/**
 * Child-process entry of the benchmark's fake gateway (started by fake-gateway-control.ts):
 * as little work per request as a server can do, so it is not what limits a run.
 *
 * - One HTTP/2 + TLS server (the test certificate of test/fixtures) for both APNs
 *   (`POST /3/device/<token>`) and FCM (`POST /v1/projects/<id>/messages:send`): reads the
 *   body, answers 200 (APNs: empty body with an `apns-id`; FCM: the message name), counts.
 *   Other paths answer 404 and requests without `authorization` 403, counted apart, so a
 *   wrongly shaped run shows up in the figures.
 * - One HTTPS (HTTP/1.1) server for FCM's OAuth2 token endpoint, answering a fixed token.
 *
 * Talks to its parent over IPC: `listening` once both servers listen; `reset` zeroes the
 * counters; `notify {total}` asks for one `reached` message once `total` requests have been
 * answered 200 since the reset; `stats` asks for the counters.
 */
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { BENCH_ACCESS_TOKEN, type FakeGatewayCommand, type FakeGatewayCounts, type FakeGatewayEvent } from './fake-gateway-protocol.js';

const [certFile, keyFile] = process.argv.slice(2);
if (!certFile || !keyFile || !process.send) {
  process.stderr.write('usage: fork(fake-gateway.js, [cert.pem, key.pem]) with an IPC channel\n');
  process.exit(2);
}
const tls = { cert: readFileSync(certFile), key: readFileSync(keyFile) };
const send = (event: FakeGatewayEvent): void => {
  process.send!(event);
};
const nowMs = (): number => performance.timeOrigin + performance.now();

let counts: FakeGatewayCounts = { ok: 0, apns: 0, fcm: 0, rejected: 0, tokenRequests: 0, sessions: 0, firstAtMs: null, lastAtMs: null };
let notifyAt = Number.POSITIVE_INFINITY;
let messageSeq = 0;

const h2 = http2.createSecureServer({ ...tls, allowHTTP1: false });
h2.on('session', (session) => {
  counts.sessions++;
  session.on('error', () => undefined);
});
h2.on('stream', (stream, headers) => {
  stream.on('error', () => undefined);
  const path = String(headers[':path'] ?? '');
  const platform = path.startsWith('/3/device/') ? 'apns' : path.endsWith('/messages:send') ? 'fcm' : undefined;
  stream.on('data', () => undefined);
  stream.on('end', () => {
    if (stream.destroyed) return;
    if (headers[':method'] !== 'POST' || platform === undefined || !headers.authorization) {
      counts.rejected++;
      stream.respond({ ':status': platform === undefined ? 404 : 403 }, { endStream: true });
      return;
    }
    const seq = ++messageSeq;
    if (platform === 'apns') {
      counts.apns++;
      stream.respond({ ':status': 200, 'apns-id': `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}` }, { endStream: true });
    } else {
      counts.fcm++;
      stream.respond({ ':status': 200, 'content-type': 'application/json; charset=UTF-8' });
      stream.end(`{"name":"projects/herald-bench/messages/0:${seq}"}`);
    }
    const at = nowMs();
    counts.firstAtMs ??= at;
    counts.lastAtMs = at;
    if (++counts.ok >= notifyAt) {
      notifyAt = Number.POSITIVE_INFINITY;
      send({ type: 'reached', counts: { ...counts } });
    }
  });
});

const token = https.createServer(tls, (req, res) => {
  req.resume();
  req.on('end', () => {
    counts.tokenRequests++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ access_token: BENCH_ACCESS_TOKEN, expires_in: 3599, token_type: 'Bearer' }));
  });
});

process.on('message', (command: FakeGatewayCommand) => {
  switch (command.type) {
    case 'reset':
      counts = { ok: 0, apns: 0, fcm: 0, rejected: 0, tokenRequests: 0, sessions: 0, firstAtMs: null, lastAtMs: null };
      notifyAt = Number.POSITIVE_INFINITY;
      break;
    case 'notify':
      notifyAt = command.total;
      if (counts.ok >= notifyAt) {
        notifyAt = Number.POSITIVE_INFINITY;
        send({ type: 'reached', counts: { ...counts } });
      }
      break;
    case 'stats':
      send({ type: 'stats', counts: { ...counts } });
      break;
  }
});
// The parent going away ends the fake too.
process.on('disconnect', () => process.exit(0));

const listen = (server: http2.Http2SecureServer | https.Server): Promise<number> =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
const [h2Port, tokenPort] = await Promise.all([listen(h2), listen(token)]);
send({ type: 'listening', h2Port, tokenPort, pid: process.pid });
