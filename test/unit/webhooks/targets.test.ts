/**
 * Webhook receivers and their credentials from the config, and a removed app's retirement: its
 * last events go to the receivers it had, signed with its key and secret, for as long as they
 * may take to be delivered, apart from (and never signed as) an app later created with its id.
 */
import { describe, expect, it } from 'vitest';
import { configSchema, type AppConfig } from '../../../src/config/schema.js';
import { queueKey } from '../../../src/webhooks/delivery-engine.js';
import { WebhookTargets, retiredKeepMs } from '../../../src/webhooks/targets.js';

const OLD: AppConfig = appConfig({ id: 'a', key: 'old-key', secret: 'old-secret', webhooks: [{ url: 'http://127.0.0.1:9/old', events: ['channel_vacated'] }] });
const NEW: AppConfig = appConfig({ id: 'a', key: 'new-key', secret: 'new-secret', webhooks: [{ url: 'http://127.0.0.1:9/new', events: ['channel_vacated'] }] });
const KEEP_MS = 1000;

function appConfig(fields: Record<string, unknown>): AppConfig {
  return configSchema.parse({ apps: [fields] }).apps[0]!;
}

function targetsAt(clock: { now: number }, apps: AppConfig[] = [OLD]): WebhookTargets {
  return new WebhookTargets({ apps, push: [] }, KEEP_MS, () => clock.now);
}

describe('webhook targets', () => {
  it('a removed app\'s events (retired) go to the receivers it had, signed with its credentials, until they are forgotten', () => {
    const clock = { now: 0 };
    const targets = targetsAt(clock);
    // Emitted as the app is removed, before the removal reaches the targets: still the app's.
    const [early] = targets.channelTargets('a', 'channel_vacated', 'room', true);
    expect(early).toEqual({ kind: 'channel', appId: 'a', url: 'http://127.0.0.1:9/old', retired: true });
    targets.patch({ removedApps: ['a'] });
    expect(targets.appHasWebhooks('a')).toBe(false);
    expect(targets.channelTargets('a', 'channel_vacated', 'room')).toEqual([]);
    expect(targets.channelTargets('a', 'channel_vacated', 'room', true)).toEqual([early]);
    expect(targets.credentials(early!)).toEqual({ kind: 'channel', appKey: 'old-key', appSecret: 'old-secret' });
    // An event emitted just before the removal and still being retried is signed as the app's too.
    expect(targets.credentials({ kind: 'channel', appId: 'a', url: 'http://127.0.0.1:9/old' })).toEqual({ kind: 'channel', appKey: 'old-key', appSecret: 'old-secret' });
    clock.now = KEEP_MS;
    expect(targets.credentials(early!)).toEqual({ kind: 'gone', reason: 'app no longer configured' });
  });

  it('an app created again with the id neither receives nor signs the old one\'s retired events, which queue apart', () => {
    const clock = { now: 0 };
    const targets = targetsAt(clock);
    targets.patch({ removedApps: ['a'] });
    targets.patch({ apps: [NEW] });
    const [retired] = targets.channelTargets('a', 'channel_vacated', 'room', true);
    const [current] = targets.channelTargets('a', 'channel_vacated', 'room');
    expect(retired!.url).toBe('http://127.0.0.1:9/old');
    expect(current!.url).toBe('http://127.0.0.1:9/new');
    expect(targets.credentials(retired!)).toMatchObject({ appKey: 'old-key' });
    expect(targets.credentials(current!)).toMatchObject({ appKey: 'new-key' });
    expect(queueKey(retired!)).not.toBe(queueKey({ ...retired!, retired: undefined } as never));
  });

  it('a reloaded config retires the apps it no longer has and keeps those retired before', () => {
    const clock = { now: 0 };
    const other = appConfig({ id: 'b', key: 'b-key', secret: 'b-secret', webhooks: [{ url: 'http://127.0.0.1:9/b' }] });
    const targets = targetsAt(clock, [OLD, other]);
    targets.patch({ removedApps: ['b'] });
    const reloaded = targets.reloaded({ apps: [], push: [] });
    for (const id of ['a', 'b']) {
      expect(reloaded.appHasWebhooks(id)).toBe(false);
      const [target] = reloaded.channelTargets(id, 'channel_vacated', 'room', true);
      expect(reloaded.credentials(target!).kind).toBe('channel');
    }
  });

  it('keeps a removed app as long as every attempt of its last webhooks may take (defaults: about 4 minutes)', () => {
    const keep = retiredKeepMs(configSchema.parse({}).webhookDelivery);
    // 3 s debounce, 50 ms batch window, 8 attempts of up to 5 s, 127 s of retry delays, a minute of margin.
    expect(keep).toBe(3000 + 50 + 8 * 5000 + 127_000 + 60_000);
  });
});
