/**
 * The sandbox gateway (`herald sandbox-gateway`): APNs, FCM (with its OAuth2 token endpoint)
 * and web push on one loopback port, so that a developer sees Herald deliver without Apple or
 * Google. Route, top-down:
 * - each connection's first byte picks the server: a TLS handshake goes to the gateways
 *   (HTTP/2 and HTTP/1.1, its self-signed certificate), anything else to plain HTTP, which
 *   serves only the sandbox's own pages;
 * - `/3/device/…` is APNs, `/token` and `/v1/projects/…` FCM, `/push/…` web push (the
 *   protocols are apns-protocol.ts, fcm-protocol.ts, web-push-protocol.ts);
 * - `/sandbox` is the page of what it received, `/sandbox/received` the same as JSON, and
 *   `POST /sandbox/web-subscriptions?name=<name>` makes a web push subscription to register.
 * The answer for each token follows sandbox-answers.ts; every request is logged in one line.
 * It speaks to Herald over the network only, like the real gateways.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApnsProtocol } from './apns-protocol.js';
import { singleHeader, type Exchange } from './exchange.js';
import { FcmProtocol } from './fcm-protocol.js';
import { GatewayServer, readBody, writeResponse, type GatewayRequest, type GatewayResponse } from './gateway-server.js';
import { apnsAnswer, prefixAnswer } from './sandbox-answers.js';
import {
  loadMaterials, loadSubscriptions, saveSubscriptions, SANDBOX_APNS_KEY_ID, SANDBOX_APNS_TEAM_ID, SANDBOX_FCM_CLIENT_EMAIL,
  SANDBOX_FCM_PROJECT_ID, type SandboxMaterials,
} from './sandbox-materials.js';
import { SANDBOX_PAGE } from './sandbox-page.js';
import { WebPushProtocol } from './web-push-protocol.js';

/** Notifications kept for the page and /sandbox/received (the oldest go first). */
export const SANDBOX_KEPT_NOTIFICATIONS = 500;
/** Longest payload text in a log line, in characters. */
const LOG_PAYLOAD_CHARS = 160;

export interface SandboxGatewayOptions {
  /** A loopback address or `localhost`: anything else is refused. */
  host: string;
  /** 0: a free port. */
  port: number;
  /** Where its certificate, keys and web push subscriptions are kept (sandbox-materials.ts). */
  dir: string;
  /** Receives one line per request and per subscription made. */
  log: (line: string) => void;
}

/** One notification as the sandbox received it. */
export interface SandboxNotification {
  /** ISO 8601 time of arrival. */
  at: string;
  platform: 'apns' | 'fcm' | 'web';
  /** The device token; for web push, the subscription's name. */
  token: string;
  /** The status answered, and the gateway's reason (`accepted` for a success). */
  status: number;
  answer: string;
  /** APNs: the JSON body; FCM: the `message`; web push: the decrypted payload (JSON when it parses). */
  payload: unknown;
}

/** The `apns`, `fcm` and `web` settings of a push instance that point Herald at the sandbox. */
export interface SandboxPushConfig {
  apns: Record<string, string>;
  fcm: Record<string, string>;
  web: Record<string, string | boolean>;
}

export interface RunningSandboxGateway {
  /** `https://<host>:<port>`: the gateways' endpoint. */
  origin: string;
  /** `http://<host>:<port>/sandbox`: the page of what it received. */
  pageUrl: string;
  port: number;
  /** Written to `<dir>/push-config.json` too. */
  pushConfig: SandboxPushConfig;
  /** Received so far (the last SANDBOX_KEPT_NOTIFICATIONS), oldest first. */
  received(): readonly SandboxNotification[];
  stop(): Promise<void>;
}

/** A refusal of the sandbox's options (a non-loopback host, a port in use): print it, no stack. */
export class SandboxGatewayError extends Error {
  override readonly name = 'SandboxGatewayError';
}

/** True for the addresses the sandbox may listen on. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (net.isIPv4(host) && host.startsWith('127.'));
}

export async function startSandboxGateway(options: SandboxGatewayOptions): Promise<RunningSandboxGateway> {
  if (!isLoopback(options.host)) {
    throw new SandboxGatewayError(`refusing to listen on ${options.host}: the sandbox gateway accepts any sender and listens on loopback only (127.0.0.1, ::1 or localhost)`);
  }
  const pages = http.createServer((req, res) => {
    void answerPage(req).then((response) => writeResponse(res, response));
  });
  // Every connection, whichever server it went to: stop() ends them all.
  const sockets = new Set<net.Socket>();
  const front = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
    socket.once('data', (first) => {
      socket.pause();
      socket.unshift(first);
      // 0x16: a TLS handshake record.
      if (first[0] === 0x16) gateways.acceptConnection(socket);
      else pages.emit('connection', socket);
      process.nextTick(() => socket.resume());
    });
  });
  const port = await new Promise<number>((resolve, reject) => {
    front.once('error', (error: NodeJS.ErrnoException) => {
      reject(error.code === 'EADDRINUSE' ? new SandboxGatewayError(`cannot listen on ${options.host}:${options.port}: it is in use; give another --port`) : error);
    });
    front.listen(options.port, options.host, () => resolve((front.address() as net.AddressInfo).port));
  });

  // Everything below is synchronous: no connection is served before the gateways exist.
  const urlHost = options.host.includes(':') ? `[${options.host}]` : options.host;
  const origin = `https://${urlHost}:${port}`;
  let materials: SandboxMaterials;
  try {
    materials = loadMaterials(options.dir, `${origin}/token`);
  } catch (error) {
    front.close();
    throw new SandboxGatewayError(`cannot keep its keys in ${options.dir}: ${error instanceof Error ? error.message : String(error)}; give another --dir`);
  }
  const received: SandboxNotification[] = [];
  const record = (notification: Omit<SandboxNotification, 'at'>): void => {
    received.push({ at: new Date().toISOString(), ...notification });
    if (received.length > SANDBOX_KEPT_NOTIFICATIONS) received.shift();
    options.log(logLine(notification));
  };

  const apns = new ApnsProtocol({ teamId: SANDBOX_APNS_TEAM_ID, keyId: SANDBOX_APNS_KEY_ID, publicKey: materials.apnsPublicKey, answers: apnsAnswer });
  const fcm = new FcmProtocol({
    projectId: SANDBOX_FCM_PROJECT_ID,
    clientEmail: SANDBOX_FCM_CLIENT_EMAIL,
    publicKey: materials.fcmPublicKey,
    tokenUri: () => `${origin}/token`,
    answers: prefixAnswer,
  });
  const web = new WebPushProtocol({ origin: () => origin, answers: (subscription) => prefixAnswer(subscription.id) });
  const subscriptions = loadSubscriptions(options.dir);
  for (const [id, keys] of subscriptions) web.addSubscription(id, keys);

  /** Logs a request refused before delivery (authentication, a missing header). */
  const refused = (platform: string, exchange: Exchange<unknown>): GatewayResponse => {
    const { status } = exchange.response;
    options.log(`${platform.padEnd(4)} ${status} refused: ${exchange.rejected?.reason ?? reasonOf(exchange.response)}`);
    return exchange.response;
  };

  const handle = async (request: GatewayRequest): Promise<GatewayResponse> => {
    if (request.path.startsWith('/3/device/')) {
      const exchange = await apns.handle(request);
      if (!exchange.received) return refused('apns', exchange);
      const { token, status, payload } = exchange.received;
      record({ platform: 'apns', token, status, answer: reasonOf(exchange.response), payload });
      return exchange.response;
    }
    if (request.path === '/token' || request.path.startsWith('/v1/projects/')) {
      const exchange = await fcm.handle(request);
      if (exchange.accessToken) return exchange.response;
      if (!exchange.received) return refused('fcm', exchange);
      const { token, status, message } = exchange.received;
      record({ platform: 'fcm', token: token ?? '', status, answer: reasonOf(exchange.response), payload: message });
      return exchange.response;
    }
    if (request.path.startsWith('/push/')) {
      const exchange = await web.handle(request);
      if (!exchange.received) return refused('web', exchange);
      const { subscriptionId, status, plaintext } = exchange.received;
      record({ platform: 'web', token: subscriptionId, status, answer: reasonOf(exchange.response), payload: parsedOrText(plaintext) });
      return exchange.response;
    }
    return answerSandbox(request.method, request.path, request.headers);
  };

  /**
   * The sandbox's own routes, on either server. Only for loopback names: a Host of another
   * name is a web page that rebound its DNS name to loopback, and a POST from a browser page
   * served from elsewhere (its Origin) is refused too.
   */
  const answerSandbox = (method: string, path: string, headers: http.IncomingHttpHeaders): GatewayResponse => {
    const url = new URL(path, 'http://sandbox');
    const host = singleHeader(headers.host ?? headers[':authority']);
    if (host === undefined || !isLoopback(hostnameOf(`http://${host}`))) return { status: 403, body: { error: 'the sandbox answers requests to a loopback address or localhost only' } };
    const origin = singleHeader(headers.origin);
    if (method !== 'GET' && origin !== undefined && !isLoopback(hostnameOf(origin))) return { status: 403, body: { error: `refused a request from a page of ${origin}` } };
    if (method === 'GET' && (url.pathname === '/sandbox' || url.pathname === '/sandbox/')) {
      return { status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: SANDBOX_PAGE };
    }
    if (method === 'GET' && url.pathname === '/sandbox/received') return { status: 200, body: { received } };
    if (method === 'POST' && url.pathname === '/sandbox/web-subscriptions') {
      const name = url.searchParams.get('name') ?? 'browser';
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) return { status: 400, body: { error: 'name: 1 to 64 letters, digits, - or _' } };
      const subscription = web.createSubscription(`${name}-${randomBytes(4).toString('hex')}`);
      subscriptions.set(subscription.id, subscription.keys);
      saveSubscriptions(options.dir, subscriptions);
      options.log(`web  subscription ${subscription.id} made: register its token with Herald's device API`);
      return { status: 201, body: { name: subscription.id, token: subscription.token, subscription: subscription.subscription } };
    }
    return {
      status: 404,
      body: { error: `no route ${method} ${url.pathname}: this port serves APNs (/3/device/…), FCM (/token, /v1/projects/…) and web push (/push/…) over HTTPS, and the page /sandbox` },
    };
  };

  const answerPage = async (req: http.IncomingMessage): Promise<GatewayResponse> => {
    await readBody(req);
    return answerSandbox(req.method ?? 'GET', req.url ?? '/', req.headers);
  };

  const gateways = new GatewayServer({ cert: materials.cert, key: materials.key, allowHTTP1: true, handler: handle });
  const pushConfig = sandboxPushConfig(origin, materials);
  writeFileSync(join(options.dir, 'push-config.json'), JSON.stringify(pushConfig, null, 2) + '\n');

  return {
    origin,
    pageUrl: `http://${urlHost}:${port}/sandbox`,
    port,
    pushConfig,
    received: () => received,
    stop: async () => {
      const closed = new Promise<void>((resolve) => front.close(() => resolve()));
      await gateways.stop();
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/** Herald's `apns`, `fcm` and `web` settings for the sandbox at `origin`. */
function sandboxPushConfig(origin: string, materials: SandboxMaterials): SandboxPushConfig {
  return {
    apns: {
      endpoint: origin,
      teamId: SANDBOX_APNS_TEAM_ID,
      keyId: SANDBOX_APNS_KEY_ID,
      privateKeyFile: materials.apnsKeyFile,
      caFile: materials.certFile,
    },
    fcm: {
      endpoint: origin,
      tokenUri: `${origin}/token`,
      serviceAccountFile: materials.fcmServiceAccountFile,
      caFile: materials.certFile,
    },
    web: {
      vapidPublicKey: materials.vapid.publicKey,
      vapidPrivateKey: materials.vapid.privateKey,
      subject: 'mailto:sandbox@herald.invalid',
      caFile: materials.certFile,
      // The sandbox's subscription endpoints are on loopback, which Herald refuses by default.
      allowPrivateEndpoints: true,
    },
  };
}

/** The gateway's reason in an answer: `accepted` for a success, else APNs' reason, FCM's error code, or web push's text. */
function reasonOf(response: GatewayResponse): string {
  if (response.status < 300) return 'accepted';
  const body = response.body;
  if (typeof body === 'string') return body || String(response.status);
  const error = body as { reason?: string; error?: { status?: string; details?: { errorCode?: string }[] } } | undefined;
  return error?.reason ?? error?.error?.details?.[0]?.errorCode ?? error?.error?.status ?? String(response.status);
}

/** The host name of a URL, without IPv6 brackets ('' when it does not parse). */
function hostnameOf(url: string): string {
  try {
    return new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return '';
  }
}

function parsedOrText(text: string | undefined): unknown {
  if (text === undefined) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * `apns 200 accepted token 0410ab…(64) {"aps":…}`: platform, answer, token, and the payload
 * cut short, less what Herald adds to every notification (`data.pusher`) and FCM's copy of the
 * token (the page and /sandbox/received show all of it).
 */
function logLine(notification: Omit<SandboxNotification, 'at'>): string {
  const { platform, status, answer, token, payload } = notification;
  const shownToken = token.length > 24 ? `${token.slice(0, 20)}…(${token.length})` : token;
  const text = typeof payload === 'string' ? payload : JSON.stringify(withoutHeraldFields(platform, payload)) ?? '';
  const shownPayload = text.length > LOG_PAYLOAD_CHARS ? `${text.slice(0, LOG_PAYLOAD_CHARS)}…` : text;
  return `${platform.padEnd(4)} ${status} ${answer} token ${shownToken} ${shownPayload}`;
}

function withoutHeraldFields(platform: SandboxNotification['platform'], payload: unknown): unknown {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return payload;
  const { data, ...rest } = payload as Record<string, unknown>;
  if (platform === 'fcm') delete rest['token'];
  if (data === null || typeof data !== 'object') return data === undefined ? rest : { ...rest, data };
  const { pusher: _pusher, ...ownData } = data as Record<string, unknown>;
  return Object.keys(ownData).length === 0 ? rest : { ...rest, data: ownData };
}
