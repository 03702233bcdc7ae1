/** The channel adapter contract against the local adapter (test/helpers/local-channel-adapter.ts). */
import { afterEach, describe, expect, it } from 'vitest';
import type { FrontEndSubscription } from '../../../../src/channels/adapter/channel-adapter.js';
import { channelShardFor } from '../../../../src/shards/hash.js';
import { HARNESS_APP, startLocalAdapter, type LocalHarness } from '../../../helpers/local-channel-adapter.js';
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
