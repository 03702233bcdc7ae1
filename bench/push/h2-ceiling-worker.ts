/**
 * Worker-thread entry of the bare HTTP/2 ceiling (h2-ceiling.ts): what one Herald shard's
 * gateway traffic costs with nothing else around it. Opens the same number of sessions per
 * platform as a shard's pool (`connectionsPerGateway`), keeps the same number of streams in
 * flight (`pushDelivery.concurrency`), and sends byte-for-byte the requests Herald sends for
 * its share of the audience (templates built once with Herald's own request builders), with
 * none of the scan, retry, bookkeeping or checkpoint work.
 */
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import { parentPort, workerData } from 'node:worker_threads';
import { buildApnsRequest } from '../../src/push/gateways/apns.js';
import { buildFcmMessage } from '../../src/push/gateways/fcm.js';
import type { Platform } from '../../src/push/platform.js';
import { gatewayPayload } from '../../src/push/shard/publishes/payload.js';
import { BENCH_BUNDLE_ID, BENCH_INSTANCE, platformOf, publishBody, tokenOf } from './dataset.js';

/** What the ceiling gives each worker. */
export interface CeilingWorkerData {
  origin: string;
  caFile: string;
  /** This worker's share: audience members j with j % workers === workerIndex. */
  workerIndex: number;
  workers: number;
  /** The audience: device indexes j * every for j < members. */
  every: number;
  members: number;
  sessionsPerPlatform: number;
  concurrency: number;
  /** Bearer credentials: an ES256 provider token for APNs, an access token for FCM. */
  apnsJwt: string;
  fcmAccessToken: string;
  fcmProjectId: string;
  /** Used in `data.pusher`, so bodies have Herald's size. */
  publishId: string;
}

/** worker → main. */
export type CeilingWorkerMessage =
  | { type: 'ready' }
  | { type: 'done'; ok: number; failed: number; firstError: string | undefined; ms: number };

const data = workerData as CeilingWorkerData;
const TOKEN_MARK = '@@HERALD_BENCH_TOKEN@@';

/** Headers and body of one device's request, from templates built with Herald's builders. */
interface RequestTemplate {
  headers: (token: string) => http2.OutgoingHttpHeaders;
  body: (token: string) => string;
}

function templates(): Record<'apns' | 'fcm', RequestTemplate> {
  const body = publishBody(['all']);
  const apnsPayload = gatewayPayload('apns', body['apns'] as Record<string, unknown>, BENCH_INSTANCE.instanceId, data.publishId);
  const apns = buildApnsRequest({ deviceId: 'x', token: TOKEN_MARK, bundleIdentifier: BENCH_BUNDLE_ID, payload: apnsPayload });
  const { ':path': _path, ...apnsHeaders } = apns.headers;
  const apnsAuth = `bearer ${data.apnsJwt}`;

  const fcmPayload = gatewayPayload('fcm', body['fcm'] as Record<string, unknown>, BENCH_INSTANCE.instanceId, data.publishId);
  const [fcmBefore, fcmAfter] = JSON.stringify({ message: buildFcmMessage(TOKEN_MARK, fcmPayload) }).split(TOKEN_MARK) as [string, string];
  const fcmPath = `/v1/projects/${encodeURIComponent(data.fcmProjectId)}/messages:send`;
  const fcmAuth = `Bearer ${data.fcmAccessToken}`;
  return {
    apns: {
      headers: (token) => ({ ...apnsHeaders, ':path': `/3/device/${encodeURIComponent(token)}`, authorization: apnsAuth }),
      body: () => apns.body,
    },
    fcm: {
      headers: () => ({ ':method': 'POST', ':path': fcmPath, 'content-type': 'application/json; charset=utf-8', authorization: fcmAuth }),
      body: (token) => fcmBefore + token + fcmAfter,
    },
  };
}

function connect(): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(data.origin, { ca: readFileSync(data.caFile) });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

const shapes = templates();
const sessions: Record<'apns' | 'fcm', http2.ClientHttp2Session[]> = { apns: [], fcm: [] };
for (const platform of ['apns', 'fcm'] as const) {
  for (let i = 0; i < data.sessionsPerPlatform; i++) sessions[platform].push(await connect());
}
const turn: Record<'apns' | 'fcm', number> = { apns: 0, fcm: 0 };

// This worker's devices, tokens derived before the clock starts (Herald reads them from LMDB).
const devices: { platform: 'apns' | 'fcm'; token: string }[] = [];
for (let j = data.workerIndex; j < data.members; j += data.workers) {
  const i = j * data.every;
  const platform: Platform = platformOf(i);
  if (platform !== 'web') devices.push({ platform, token: tokenOf(i, platform) });
}

function send(platform: 'apns' | 'fcm', token: string): Promise<number> {
  const pool = sessions[platform];
  const session = pool[turn[platform]++ % pool.length]!;
  const shape = shapes[platform];
  return new Promise((resolve, reject) => {
    const stream = session.request(shape.headers(token));
    let status = 0;
    stream.on('response', (headers) => {
      status = Number(headers[':status']);
    });
    stream.on('data', () => undefined);
    stream.on('end', () => resolve(status));
    stream.on('error', reject);
    stream.end(shape.body(token));
  });
}

async function run(): Promise<CeilingWorkerMessage> {
  const started = performance.now();
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const lane = async (): Promise<void> => {
    while (next < devices.length) {
      const { platform, token } = devices[next++]!;
      try {
        const status = await send(platform, token);
        if (status === 200) ok++;
        else {
          failed++;
          firstError ??= `HTTP ${status}`;
        }
      } catch (error) {
        failed++;
        firstError ??= String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: data.concurrency }, lane));
  return { type: 'done', ok, failed, firstError, ms: performance.now() - started };
}

parentPort!.once('message', () => {
  void run().then((result) => {
    parentPort!.postMessage(result satisfies CeilingWorkerMessage);
    for (const session of [...sessions.apns, ...sessions.fcm]) session.close();
  });
});
parentPort!.postMessage({ type: 'ready' } satisfies CeilingWorkerMessage);
