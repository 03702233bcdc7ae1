/**
 * The channel adapter contract against the local adapter (test/helpers/local-channel-adapter.ts),
 * its reconcile, and front-end threads: an adapter of one thread reconciles that thread's
 * subscribers only, and dropFrontEnd removes a gone thread's subscribers with their frames and
 * their webhooks through the leave debounce.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FrontEndSubscription } from '../../../../src/channels/adapter/channel-adapter.js';
import { LocalChannelAdapter } from '../../../../src/channels/adapter/local-adapter.js';
import { newSocketId } from '../../../../src/channels/socket-id.js';
import type { AppConfig } from '../../../../src/config/schema.js';
import { channelShardFor } from '../../../../src/shards/hash.js';
import { HARNESS_APP, startAdapterHarness, startLocalAdapter, type Harness, type LocalHarness } from '../../../helpers/local-channel-adapter.js';
import { WebhookReceiver } from '../../../helpers/webhook-receiver.js';
import { until } from '../../../helpers/wait.js';
import { CONTRACT_APP, channelAdapterContract } from './channel-adapter-contract.js';

if (CONTRACT_APP !== HARNESS_APP) throw new Error('the harness serves the contract app');
// A small shard queue: one request per join or leave would overflow it in the burst case.
channelAdapterContract('local (shards + uWS topics)', () => startLocalAdapter({}, { maxQueuePerShard: 50 }));

describe('local adapter: reconcile', () => {
  let h: LocalHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  }, 60_000);

  it('after a failed batch, removes a subscriber the front end does not hold (member_removed to the others) and retries the leave', async () => {
    h = await startLocalAdapter({}, { requestTimeoutMs: 1_000 });
    const channel = 'presence-room';
    const shard = channelShardFor(HARNESS_APP, channel, h.shards.shardCount);
    // What the front end holds, as the WebSocket front end answers it (ws/subscriptions.ts).
    const frontEnd: FrontEndSubscription[] = [];
    h.adapter.onStateLost((lost) => frontEnd.filter((sub) => lost(sub.appId, sub.channel)));
    const [ada, bob] = [await h.connect(HARNESS_APP), await h.connect(HARNESS_APP)];
    for (const [conn, userId] of [[ada, 'ada'], [bob, 'bob']] as const) {
      const sub = { appId: HARNESS_APP, channel, socketId: conn.socketId, member: { userId, userInfo: null } };
      const joined = await h.adapter.subscribe(sub);
      h.adapter.attach(conn.socket, HARNESS_APP, channel, joined);
      frontEnd.push(sub);
    }
    // A ghost: recorded on the shard behind the front end's back (as a lost leave leaves one).
    await h.shards.request(shard, { type: 'channels.subscribe', appId: HARNESS_APP, channel, socketId: '77.77', member: { userId: 'ghost', userInfo: null } });
    // The shard stalls past the request timeout: bob's leave fails, is retried, and the shard is reconciled.
    const stall = h.shards.request(shard, { type: 'core.stall', stallMs: 2_500 }, 10_000);
    frontEnd.splice(1, 1);
    h.adapter.detach(bob.socket, HARNESS_APP, channel);
    // Resolves once applied: by the retried leave or, when the reconcile came first, as a no-op.
    await h.adapter.unsubscribe(HARNESS_APP, channel, bob.socketId);
    await stall;
    await until(() => ada.frames.some((f) => f.includes('pusher_internal:member_removed') && f.includes('ghost')), 'ghost removed', 20_000);
    expect(await h.adapter.presenceUserIds(HARNESS_APP, channel)).toEqual(['ada']);
    expect(await h.adapter.channelInfo(HARNESS_APP, channel, { subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 1 });
  });
});

describe('local adapter: front-end threads', () => {
  let h: (Harness<LocalChannelAdapter> & { close(): Promise<void> }) | undefined;
  let receiver: WebhookReceiver | undefined;
  afterEach(async () => {
    await h?.close();
    await receiver?.close();
    h = undefined;
    receiver = undefined;
  }, 60_000);

  it('an adapter of one thread reconciles that thread\'s subscribers only, leaving another thread\'s alone', async () => {
    h = await startAdapterHarness(async ({ topics, shards, registry }) => new LocalChannelAdapter(topics, shards, registry, { frontEnd: 1 }), {}, { requestTimeoutMs: 1_000 });
    const channel = 'presence-room';
    const shard = channelShardFor(HARNESS_APP, channel, h.shards.shardCount);
    const ada = await h.connect(HARNESS_APP);
    // The harness's first socket id, 1.2, is one of thread 1's.
    expect(ada.socketId).toBe('1.2');
    const sub = { appId: HARNESS_APP, channel, socketId: ada.socketId, member: { userId: 'ada', userInfo: null } };
    h.adapter.attach(ada.socket, HARNESS_APP, channel, await h.adapter.subscribe(sub));
    h.adapter.onStateLost((lost) => [sub].filter((s) => lost(s.appId, s.channel)));
    const record = (socketId: string, userId: string) =>
      h!.shards.request(shard, { type: 'channels.subscribe', appId: HARNESS_APP, channel, socketId, member: { userId, userInfo: null } });
    await record(newSocketId(0), 'zed'); // thread 0's subscriber: not this adapter's to judge
    await record(newSocketId(1), 'ghost'); // thread 1's ghost
    // A join that times out behind a stall makes the shard due for a reconcile.
    const stall = h.shards.request(shard, { type: 'core.stall', stallMs: 2_500 }, 10_000);
    await expect(h.adapter.subscribe({ appId: HARNESS_APP, channel, socketId: newSocketId(1), member: { userId: 'late' } })).rejects.toThrow();
    await stall;
    await until(() => ada.frames.some((f) => f.includes('pusher_internal:member_removed') && f.includes('ghost')), 'ghost removed', 20_000);
    await until(async () => !(await h!.adapter.presenceUserIds(HARNESS_APP, channel)).includes('late'), 'the timed-out join removed', 20_000);
    expect((await h.adapter.presenceUserIds(HARNESS_APP, channel)).sort()).toEqual(['ada', 'zed']);
  });

  it('dropFrontEnd removes a gone thread\'s subscribers: frames to the others, webhooks after the leave debounce', async () => {
    receiver = await WebhookReceiver.start();
    const webhooks = [{ url: receiver.url('/pusher') }] as AppConfig['webhooks'];
    h = await startAdapterHarness(async ({ topics, shards, registry }) => new LocalChannelAdapter(topics, shards, registry), { subscriptionCount: true, webhooks });
    const ada = await h.connect(HARNESS_APP);
    for (const channel of ['presence-room', 'news']) {
      const sub = { appId: HARNESS_APP, channel, socketId: ada.socketId, ...(channel === 'news' ? {} : { member: { userId: 'ada', userInfo: null } }) };
      h.adapter.attach(ada.socket, HARNESS_APP, channel, await h.adapter.subscribe(sub));
    }
    // Thread 7's subscribers, whose connections went with the thread.
    const gone = newSocketId(7);
    const record = (channel: string, member?: { userId: string; userInfo: null }) =>
      h!.shards.request(channelShardFor(HARNESS_APP, channel, h!.shards.shardCount), { type: 'channels.subscribe', appId: HARNESS_APP, channel, socketId: gone, ...(member ? { member } : {}) });
    await record('presence-room', { userId: 'bob', userInfo: null });
    await record('news');
    await record('only-seven');
    await until(() => receiver!.deliveredEvents().some((e) => e.name === 'member_added' && e.user_id === 'bob'), 'bob added');
    const droppedAt = Date.now();
    await h.adapter.dropFrontEnd(7);
    await until(() => ada.frames.some((f) => f.includes('pusher_internal:member_removed') && f.includes('bob')), 'member_removed frame');
    await until(() => ada.frames.some((f) => f.includes('pusher_internal:subscription_count') && f.includes('"news"')), 'subscription_count frame');
    expect(await h.adapter.presenceUserIds(HARNESS_APP, 'presence-room')).toEqual(['ada']);
    expect(await h.adapter.channelInfo(HARNESS_APP, 'news', { subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 1 });
    expect(await h.adapter.channelInfo(HARNESS_APP, 'only-seven', {})).toEqual({ occupied: false });
    const requestWith = (name: string, match: (e: Record<string, unknown>) => boolean) =>
      receiver!.delivered().find((r) => (JSON.parse(r.rawBody) as { events: Record<string, unknown>[] }).events.some((e) => e.name === name && match(e)));
    const memberRemoved = await until(() => requestWith('member_removed', (e) => e.user_id === 'bob'), 'member_removed webhook', 15_000);
    const vacated = await until(() => requestWith('channel_vacated', (e) => e.channel === 'only-seven'), 'channel_vacated webhook', 15_000);
    // Both were held for pageReloadDebounceMs (3 s by default) first.
    for (const req of [memberRemoved, vacated]) expect(req.receivedAt - droppedAt).toBeGreaterThanOrEqual(2_900);
  }, 30_000);
});
