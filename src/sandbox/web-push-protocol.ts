/**
 * A web push service (RFC 8030) as a local server speaks it: `POST /push/<subscription id>`,
 * the VAPID header checked (RFC 8292), each aes128gcm payload (RFC 8188/8291) decrypted with
 * the subscription's private keys. Subscriptions are made here (createSubscription), as a
 * browser's push service makes them on pushManager.subscribe().
 */
import { createDecipheriv, createECDH, hkdfSync, randomBytes } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { importJWK, jwtVerify } from 'jose';
import { retryAfterHeader, singleHeader, type Exchange, type TokenAnswer, type TokenAnswers } from './exchange.js';
import type { GatewayRequest, GatewayResponse } from './gateway-server.js';

export interface WebPushProtocolOptions {
  /** This service's origin (`https://host:port`): subscription endpoints and the VAPID audience. */
  origin: () => string;
  /** Answers other than acceptance, per subscription. */
  answers: TokenAnswers<BrowserSubscription>;
  /** The VAPID public key (base64url) senders must use; any valid key is accepted when absent. */
  vapidPublicKey?: string;
}

/** The user agent's side of a subscription: what a browser keeps to decrypt pushes. */
export interface SubscriptionKeys {
  /** P-256 private scalar, 32 bytes. */
  privateKey: Buffer;
  /** Uncompressed P-256 public key, 65 bytes (the subscription's p256dh). */
  publicKey: Buffer;
  /** 16-byte auth secret (the subscription's auth). */
  authSecret: Buffer;
}

/** A browser-like subscription on this service. */
export interface BrowserSubscription {
  id: string;
  /** What the Beams web SDK registers: base64 of the PushSubscription JSON. */
  token: string;
  subscription: { endpoint: string; keys: { p256dh: string; auth: string } };
  keys: SubscriptionKeys;
}

/** One authenticated push, with the status answered. */
export interface WebPushReceived {
  subscriptionId: string;
  token: string;
  status: number;
  ttl: string | undefined;
  urgency: string | undefined;
  /** Decrypted payload (undefined when the answer came before decryption, e.g. a chosen failure). */
  plaintext: string | undefined;
  /** Claims of the VAPID JWT. */
  vapid: { aud: unknown; sub: unknown; exp: unknown };
  /** 'h2' or 'http/1.1'. */
  protocol: string;
}

/**
 * Decrypts an RFC 8291 aes128gcm body with the receiving side's keys. Throws when the body is
 * malformed or does not authenticate.
 */
export function decryptAes128gcm(body: Buffer, keys: SubscriptionKeys): Buffer {
  if (body.length < 21) throw new Error('body shorter than the aes128gcm header');
  const salt = body.subarray(0, 16);
  const recordSize = body.readUInt32BE(16);
  const idLength = body[20]!;
  const senderPublicKey = body.subarray(21, 21 + idLength);
  if (senderPublicKey.length !== 65 || recordSize < 18) throw new Error('bad aes128gcm header');
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(keys.privateKey);
  const sharedSecret = ecdh.computeSecret(senderPublicKey);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), keys.publicKey, senderPublicKey]);
  const ikm = Buffer.from(hkdfSync('sha256', sharedSecret, keys.authSecret, keyInfo, 32));
  const contentKey = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const baseNonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));

  const ciphertext = body.subarray(21 + idLength);
  const plaintext: Buffer[] = [];
  for (let offset = 0, sequence = 0; offset < ciphertext.length; offset += recordSize, sequence++) {
    const record = ciphertext.subarray(offset, offset + recordSize);
    const last = offset + recordSize >= ciphertext.length;
    const nonce = Buffer.from(baseNonce);
    // RFC 8188: the record sequence number is XORed into the nonce's low bytes (records here are few: 32 bits suffice).
    nonce.writeUInt32BE((nonce.readUInt32BE(8) ^ sequence) >>> 0, 8);
    const decipher = createDecipheriv('aes-128-gcm', contentKey, nonce);
    decipher.setAuthTag(record.subarray(record.length - 16));
    const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
    let end = padded.length - 1;
    while (end >= 0 && padded[end] === 0) end--;
    if (end < 0 || padded[end] !== (last ? 2 : 1)) throw new Error('bad record padding delimiter');
    plaintext.push(padded.subarray(0, end));
  }
  return Buffer.concat(plaintext);
}

export class WebPushProtocol {
  readonly #options: WebPushProtocolOptions;
  readonly #subscriptions = new Map<string, BrowserSubscription>();

  constructor(options: WebPushProtocolOptions) {
    this.#options = options;
  }

  /**
   * Does what a browser does on pushManager.subscribe(): a new P-256 key pair and auth secret,
   * an endpoint on this service named `id` (random when absent).
   */
  createSubscription(id: string = randomBytes(12).toString('base64url')): BrowserSubscription {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    return this.addSubscription(id, { privateKey: ecdh.getPrivateKey(), publicKey: ecdh.getPublicKey(), authSecret: randomBytes(16) });
  }

  /** Serves a subscription made earlier (kept across restarts by whoever made it). */
  addSubscription(id: string, keys: SubscriptionKeys): BrowserSubscription {
    const subscription = {
      endpoint: `${this.#options.origin()}/push/${id}`,
      keys: { p256dh: keys.publicKey.toString('base64url'), auth: keys.authSecret.toString('base64url') },
    };
    const created: BrowserSubscription = { id, token: Buffer.from(JSON.stringify(subscription)).toString('base64'), subscription, keys };
    this.#subscriptions.set(id, created);
    return created;
  }

  async handle(request: GatewayRequest): Promise<Exchange<WebPushReceived>> {
    const match = /^\/push\/([^/?]+)$/.exec(request.path);
    const subscription = match ? this.#subscriptions.get(match[1]!) : undefined;
    if (request.method !== 'POST' || !subscription) return reject(404, 'no such subscription');

    const vapid = await this.#verifyVapid(String(request.headers['authorization'] ?? ''));
    if ('problem' in vapid) return reject(vapid.status, vapid.problem);

    const received: WebPushReceived = {
      subscriptionId: subscription.id,
      token: subscription.token,
      status: 201,
      ttl: singleHeader(request.headers['ttl']),
      urgency: singleHeader(request.headers['urgency']),
      plaintext: undefined,
      vapid: vapid.claims,
      protocol: request.protocol,
    };
    const response = this.#answer(request, subscription, received);
    received.status = response.status;
    return { response, received };
  }

  /** The answer to an authenticated push; sets `received.plaintext` once decrypted. */
  #answer(request: GatewayRequest, subscription: BrowserSubscription, received: WebPushReceived): GatewayResponse {
    if (received.ttl === undefined || !/^\d+$/.test(received.ttl)) return { status: 400, body: 'missing or bad TTL header' };
    if (singleHeader(request.headers['content-encoding']) !== 'aes128gcm') return { status: 415, body: 'content-encoding must be aes128gcm' };
    const answer = this.#options.answers(subscription);
    if (answer) return answerResponse(answer);
    try {
      received.plaintext = decryptAes128gcm(request.body, subscription.keys).toString('utf8');
    } catch (error) {
      return { status: 400, body: `decryption failed: ${error instanceof Error ? error.message : String(error)}` };
    }
    return { status: 201, body: '', headers: { location: `${this.#options.origin()}/message/${randomBytes(8).toString('hex')}` } };
  }

  /** Checks `Authorization: vapid t=<jwt>, k=<public key>`: ES256 signature by k, aud = our origin, exp within 24 h. */
  async #verifyVapid(authorization: string): Promise<{ claims: WebPushReceived['vapid'] } | { status: number; problem: string }> {
    const scheme = /^vapid\s+(.*)$/i.exec(authorization);
    if (!scheme) return { status: 401, problem: 'missing vapid authorization' };
    const params = new Map<string, string>();
    for (const part of scheme[1]!.split(',')) {
      const eq = part.indexOf('=');
      if (eq > 0) params.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
    }
    const jwt = params.get('t');
    const publicKeyText = params.get('k');
    if (!jwt || !publicKeyText) return { status: 401, problem: 'vapid t or k missing' };
    if (this.#options.vapidPublicKey !== undefined && publicKeyText !== this.#options.vapidPublicKey) {
      return { status: 403, problem: 'vapid key does not match the subscription' };
    }
    const publicKey = Buffer.from(publicKeyText, 'base64url');
    if (publicKey.length !== 65 || publicKey[0] !== 4) return { status: 401, problem: 'vapid k is not an uncompressed P-256 key' };
    try {
      const key = await importJWK({
        kty: 'EC',
        crv: 'P-256',
        x: publicKey.subarray(1, 33).toString('base64url'),
        y: publicKey.subarray(33, 65).toString('base64url'),
      }, 'ES256');
      const { payload } = await jwtVerify(jwt, key, { algorithms: ['ES256'], audience: this.#options.origin(), requiredClaims: ['exp', 'sub'] });
      if (payload.exp! > Date.now() / 1000 + 24 * 3600 + 60) return { status: 401, problem: 'vapid exp more than 24 h ahead' };
      return { claims: { aud: payload.aud, sub: payload.sub, exp: payload.exp } };
    } catch (error) {
      return { status: 401, problem: `vapid jwt: ${error instanceof Error ? error.message : String(error)}` };
    }
  }
}

function answerResponse(answer: TokenAnswer): GatewayResponse {
  switch (answer.kind) {
    case 'unregistered':
      return { status: 410, body: 'push subscription has unsubscribed or expired' };
    case 'bad-token':
      return { status: 400, body: 'bad request' };
    case 'status':
      return { status: answer.status, body: answer.reason ?? STATUS_CODES[answer.status] ?? 'error', headers: retryAfterHeader(answer) };
  }
}

function reject(status: number, reason: string): Exchange<WebPushReceived> {
  return { response: { status, body: reason }, rejected: { status, reason } };
}
