/**
 * Starts the three fake gateways (APNs, FCM with its OAuth2 token endpoint, web push) on local
 * TLS ports and builds the matching Herald push instance config: endpoints, tokenUri, keys and
 * caFile pointing at them. Each fake can be slowed down (`delayMs`) to keep a publish running,
 * e.g. across a kill -9. (Webhooks a publish produces: test/helpers/webhook-receiver.ts.)
 */
import { randomBytes } from 'node:crypto';
import { deviceShardFor } from '../../src/shards/hash.js';
import { ApnsFake } from '../fakes/apns-fake.js';
import { FcmFake } from '../fakes/fcm-fake.js';
import type { FakeRequest, FakeResponse } from '../fakes/fake-server.js';
import { apnsKeys, fcmKeys, TEST_CA_FILE, vapidKeys } from '../fakes/tls.js';
import { WebPushFake } from '../fakes/webpush-fake.js';
import { sleep, until } from './wait.js';

export const APNS_TEAM_ID = 'HERALDTEAM';
export const APNS_KEY_ID = 'HERALDKEY1';
export const FCM_PROJECT_ID = 'herald-test';
export const FCM_CLIENT_EMAIL = 'herald@herald-test.iam.gserviceaccount.com';
export const VAPID_SUBJECT = 'mailto:push@herald.test';

/** APNs fake that can wait `delayMs` before answering each request. */
export class SlowApnsFake extends ApnsFake {
  delayMs = 0;
  protected override async handle(request: FakeRequest): Promise<FakeResponse> {
    // time: a gateway slowed down on purpose (keeps a publish running).
    if (this.delayMs > 0) await sleep(this.delayMs);
    return super.handle(request);
  }
}

/** FCM fake whose messages:send (not the token endpoint) can wait `delayMs`. */
export class SlowFcmFake extends FcmFake {
  delayMs = 0;
  protected override async handle(request: FakeRequest): Promise<FakeResponse> {
    // time: a gateway slowed down on purpose (keeps a publish running).
    if (this.delayMs > 0 && request.path !== '/token') await sleep(this.delayMs);
    return super.handle(request);
  }
}

/** Web push fake that can wait `delayMs` before answering each push. */
export class SlowWebPushFake extends WebPushFake {
  delayMs = 0;
  protected override async handle(request: FakeRequest): Promise<FakeResponse> {
    // time: a gateway slowed down on purpose (keeps a publish running).
    if (this.delayMs > 0) await sleep(this.delayMs);
    return super.handle(request);
  }
}

export interface FakeGateways {
  apns: SlowApnsFake;
  fcm: SlowFcmFake;
  web: SlowWebPushFake;
  /**
   * A `push[]` entry for Herald's config with all three gateways pointing at the fakes;
   * `overrides` are merged on top (instanceId, secretKey, webhooks, quotas...).
   */
  instanceConfig(overrides?: Record<string, unknown>): Record<string, unknown>;
  /**
   * The same as a body for the admin API, which takes key material only (no file paths): no
   * `caFile`; the node must trust the fakes' CA otherwise (NODE_EXTRA_CA_CERTS=TEST_CA_FILE).
   */
  apiInstanceConfig(overrides?: Record<string, unknown>): Record<string, unknown>;
  /**
   * Tokens the fakes accepted for one publish, per platform, each occurrence (so repeats show):
   * the publish id is in what Herald adds to each payload (`data.pusher`).
   */
  deliveredFor(publishId: string): { apns: string[]; fcm: string[]; web: string[] };
  /** Sets the answer delay of all three fakes, ms. */
  setDelay(ms: number): void;
  /** Forgets dead tokens and scripted failures on all three. */
  resetBehaviour(): void;
  stop(): Promise<void>;
}

/** Starts the three fakes on free ports; call stop() in afterAll. */
export async function startFakeGateways(): Promise<FakeGateways> {
  const vapid = vapidKeys();
  const apns = await new SlowApnsFake({ teamId: APNS_TEAM_ID, keyId: APNS_KEY_ID, publicKey: apnsKeys().publicKey }).start();
  const fcm = await new SlowFcmFake({ projectId: FCM_PROJECT_ID, clientEmail: FCM_CLIENT_EMAIL, publicKey: fcmKeys().publicKey }).start();
  const web = await new SlowWebPushFake({ vapidPublicKey: vapid.publicKey }).start();
  const gateways: FakeGateways = {
    apns,
    fcm,
    web,
    instanceConfig: (overrides = {}) => ({
      apns: { endpoint: apns.origin, teamId: APNS_TEAM_ID, keyId: APNS_KEY_ID, privateKey: apnsKeys().privateKey, caFile: TEST_CA_FILE },
      fcm: {
        endpoint: fcm.origin,
        tokenUri: fcm.tokenUri,
        projectId: FCM_PROJECT_ID,
        clientEmail: FCM_CLIENT_EMAIL,
        privateKey: fcmKeys().privateKey,
        caFile: TEST_CA_FILE,
      },
      // The fake's endpoints are on 127.0.0.1, which Herald refuses unless told otherwise.
      web: { vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: VAPID_SUBJECT, caFile: TEST_CA_FILE, allowPrivateEndpoints: true },
      ...overrides,
    }),
    apiInstanceConfig: (overrides = {}) => {
      const withoutCa = (platform: unknown) => {
        const { caFile: _ca, ...rest } = platform as Record<string, unknown>;
        return rest;
      };
      const files = gateways.instanceConfig();
      return { apns: withoutCa(files.apns), fcm: withoutCa(files.fcm), web: withoutCa(files.web), ...overrides };
    },
    deliveredFor: (publishId) => ({
      apns: apns.delivered.filter((r) => (r.payload as { data?: { pusher?: { publishId?: string } } }).data?.pusher?.publishId === publishId).map((r) => r.token),
      fcm: fcm.delivered.filter((r) => String((r.message['data'] as Record<string, string> | undefined)?.['pusher'] ?? '').includes(publishId)).map((r) => r.token!),
      web: web.delivered.filter((r) => (r.plaintext ?? '').includes(publishId)).map((r) => r.token),
    }),
    setDelay: (ms) => {
      apns.delayMs = ms;
      fcm.delayMs = ms;
      web.delayMs = ms;
    },
    resetBehaviour: () => {
      apns.resetBehaviour();
      fcm.resetBehaviour();
      web.resetBehaviour();
    },
    stop: async () => {
      await Promise.all([apns.stop(), fcm.stop(), web.stop()]);
    },
  };
  return gateways;
}

/** Where a running Herald is and how many shards it has, for confirmGatewayClients. */
export interface HeraldTarget {
  baseUrl: string;
  instanceId: string;
  secretKey: string;
  shards: number;
}

/**
 * Makes every shard's APNs, FCM and web push clients of an instance have one accepted send,
 * as a real deployment's first publish does: a client treats dead-token answers as dead (and
 * deletes the device) only after that (src/push/gateways/dead-token-guard.ts). Registers
 * devices through the device API until each shard holds one per platform, publishes to them,
 * waits until the fakes have accepted every one, then deletes them again.
 */
export async function confirmGatewayClients(fakes: FakeGateways, target: HeraldTarget): Promise<void> {
  const devices = `${target.baseUrl}/device_api/v1/instances/${target.instanceId}/devices`;
  const json = { 'content-type': 'application/json' };
  const interest = `warm-up-${randomBytes(4).toString('hex')}`;
  const kept: { platform: 'apns' | 'fcm' | 'web'; id: string; token: string }[] = [];
  for (const platform of ['apns', 'fcm', 'web'] as const) {
    const covered = new Set<number>();
    for (let attempt = 0; covered.size < target.shards; attempt++) {
      if (attempt > 64 * target.shards) throw new Error(`could not place a ${platform} device on every shard`);
      const token = platform === 'apns' ? randomBytes(32).toString('hex')
        : platform === 'fcm' ? `warm-up-fcm-${randomBytes(8).toString('hex')}`
          : fakes.web.createSubscription().token;
      const created = await fetch(`${devices}/${platform}`, {
        method: 'POST', headers: json, body: JSON.stringify({ token, ...(platform === 'apns' ? { bundleIdentifier: 'com.herald.warm-up' } : {}) }),
      });
      if (created.status !== 200) throw new Error(`warm-up registration answered ${created.status}: ${await created.text()}`);
      const { id } = (await created.json()) as { id: string };
      const shard = deviceShardFor(id, target.shards);
      if (covered.has(shard)) {
        await fetch(`${devices}/${platform}/${id}`, { method: 'DELETE' });
        continue;
      }
      covered.add(shard);
      kept.push({ platform, id, token });
      const subscribed = await fetch(`${devices}/${platform}/${id}/interests/${interest}`, { method: 'POST' });
      if (subscribed.status !== 200) throw new Error(`warm-up subscription answered ${subscribed.status}`);
    }
  }
  const published = await fetch(`${target.baseUrl}/publish_api/v1/instances/${target.instanceId}/publishes/interests`, {
    method: 'POST',
    headers: { ...json, authorization: `Bearer ${target.secretKey}` },
    body: JSON.stringify({
      interests: [interest],
      apns: { aps: { alert: 'warm-up' } },
      fcm: { notification: { title: 'warm-up' } },
      web: { notification: { title: 'warm-up' } },
    }),
  });
  if (published.status !== 200) throw new Error(`warm-up publish answered ${published.status}: ${await published.text()}`);
  const accepted = (device: (typeof kept)[number]): boolean => fakes[device.platform].delivered.some((r) => r.token === device.token);
  await until(() => kept.every(accepted), 'the fakes to accept every warm-up send');
  await Promise.all(kept.map((device) => fetch(`${devices}/${device.platform}/${device.id}`, { method: 'DELETE' })));
}
