/**
 * A local web push service (RFC 8030) on TLS, HTTP/2 with HTTP/1.1 allowed: checks the VAPID
 * header (RFC 8292), decrypts each aes128gcm payload (RFC 8188/8291) with the subscription's
 * private keys, and records the plaintext. Subscriptions are made with createSubscription().
 */
import { createDecipheriv, createECDH, hkdfSync, randomBytes } from 'node:crypto';
import { importJWK, jwtVerify } from 'jose';
import { FakeGateway, type FakeRequest, type FakeResponse } from './fake-server.js';

export interface WebPushFakeOptions {
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

/** A browser-like subscription on this fake. */
export interface BrowserSubscription {
  id: string;
  /** What the Beams web SDK registers: base64 of the PushSubscription JSON. */
  token: string;
  subscription: { endpoint: string; keys: { p256dh: string; auth: string } };
  keys: SubscriptionKeys;
}

/** One authenticated push, with the status the fake answered. */
export interface WebPushReceived {
  subscriptionId: string;
  token: string;
  status: number;
  ttl: string | undefined;
  urgency: string | undefined;
  /** Decrypted payload (undefined when the answer came before decryption, e.g. a scripted failure). */
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

/** Start with `await new WebPushFake({...}).start()`; make subscriptions with createSubscription(). */
export class WebPushFake extends FakeGateway {
  /** Every request that passed VAPID authentication, in arrival order. */
  readonly received: WebPushReceived[] = [];
  /** Refusals (unknown subscription, VAPID, encoding), with the reason. */
  readonly rejected: { status: number; reason: string }[] = [];
  readonly #options: WebPushFakeOptions;
  readonly #subscriptions = new Map<string, BrowserSubscription>();

  constructor(options: WebPushFakeOptions = {}) {
    super(true);
    this.#options = options;
  }

  /** Requests answered 201. */
  get delivered(): WebPushReceived[] {
    return this.received.filter((entry) => entry.status === 201);
  }

  /** Does what a browser does on pushManager.subscribe(): new P-256 key pair and auth secret, endpoint on this fake. */
  createSubscription(): BrowserSubscription {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const keys: SubscriptionKeys = { privateKey: ecdh.getPrivateKey(), publicKey: ecdh.getPublicKey(), authSecret: randomBytes(16) };
    const id = randomBytes(12).toString('base64url');
    const subscription = {
      endpoint: `${this.origin}/push/${id}`,
      keys: { p256dh: keys.publicKey.toString('base64url'), auth: keys.authSecret.toString('base64url') },
    };
    const created: BrowserSubscription = { id, token: Buffer.from(JSON.stringify(subscription)).toString('base64'), subscription, keys };
    this.#subscriptions.set(id, created);
    return created;
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    const match = /^\/push\/([^/?]+)$/.exec(request.path);
    const subscription = match ? this.#subscriptions.get(match[1]!) : undefined;
    if (request.method !== 'POST' || !subscription) return this.#reject(404, 'no such subscription');

    const vapid = await this.#verifyVapid(String(request.headers['authorization'] ?? ''));
    if ('problem' in vapid) return this.#reject(vapid.status, vapid.problem);

    const entry: WebPushReceived = {
      subscriptionId: subscription.id,
      token: subscription.token,
      status: 201,
      ttl: single(request.headers['ttl']),
      urgency: single(request.headers['urgency']),
      plaintext: undefined,
      vapid: vapid.claims,
      protocol: request.protocol,
    };
    this.received.push(entry);
    const answer = (status: number, body: string, headers: Record<string, string> = {}): FakeResponse => {
      entry.status = status;
      return { status, body, headers };
    };

    if (entry.ttl === undefined || !/^\d+$/.test(entry.ttl)) return answer(400, 'missing or bad TTL header');
    if (single(request.headers['content-encoding']) !== 'aes128gcm') return answer(415, 'content-encoding must be aes128gcm');
    const failure = this.takeFailure(subscription.token);
    if (failure) return answer(failure.status, failure.reason ?? 'scripted failure', FakeGateway.retryAfterHeader(failure));
    if (this.deadTokens.has(subscription.token)) return answer(410, 'push subscription has unsubscribed or expired');
    try {
      entry.plaintext = decryptAes128gcm(request.body, subscription.keys).toString('utf8');
    } catch (error) {
      return answer(400, `decryption failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    return answer(201, '', { location: `${this.origin}/message/${randomBytes(8).toString('hex')}` });
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
      const { payload } = await jwtVerify(jwt, key, { algorithms: ['ES256'], audience: this.origin, requiredClaims: ['exp', 'sub'] });
      if (payload.exp! > Date.now() / 1000 + 24 * 3600 + 60) return { status: 401, problem: 'vapid exp more than 24 h ahead' };
      return { claims: { aud: payload.aud, sub: payload.sub, exp: payload.exp } };
    } catch (error) {
      return { status: 401, problem: `vapid jwt: ${error instanceof Error ? error.message : String(error)}` };
    }
  }

  #reject(status: number, reason: string): FakeResponse {
    this.rejected.push({ status, reason });
    return { status, body: reason };
  }
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
