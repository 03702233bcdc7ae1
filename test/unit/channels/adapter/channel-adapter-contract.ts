/**
 * The contract every channel adapter passes (undici's habit: one suite, every implementation).
 * `make` builds an adapter on a fresh state with a way to open real connections; the suite
 * drives the adapter as the WebSocket front end and the channel HTTP API do, and checks what
 * the connections receive. Run against the local adapter (local-adapter.test.ts); a Redis
 * adapter will run the same suite.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DebugHub } from '../../../../src/admin/debug-hub.js';
import type { DebugEvent } from '../../../../src/debug-tap/tap.js';
import type { ChannelAdapter, ChannelSocket } from '../../../../src/channels/adapter/channel-adapter.js';
import { until } from '../../../helpers/wait.js';

/** A live connection of the adapter's front end, seen from both ends. */
export interface ContractConnection {
  readonly socketId: string;
  /** The server side, as the front end hands it to attach / detach / watch. */
  readonly socket: ChannelSocket;
  /** Every text frame the client received, in order. */
  readonly frames: string[];
  /** Resolves with the close code once the server closed the connection. */
  readonly closed: Promise<number>;
}

export interface AdapterHarness {
  adapter: ChannelAdapter;
  /** Opens a connection of the app; with `userId`, the connection is signed in as that user. */
  connect(appId: string, userId?: string): Promise<ContractConnection>;
  close(): Promise<void>;
}

/** The app every contract test uses (the harness configures it, with a cache TTL of minutes). */
export const CONTRACT_APP = 'contract-app';

export function channelAdapterContract(name: string, make: () => Promise<AdapterHarness>): void {
  describe(`channel adapter contract: ${name}`, () => {
    let h: AdapterHarness;
    beforeEach(async () => {
      h = await make();
    }, 60_000);
    afterEach(async () => {
      await h.close();
    }, 60_000);

    const app = CONTRACT_APP;

    it('reports occupied on the first subscription and vacated on the last leave, with the counts', async () => {
      const a = await h.connect(app);
      const b = await h.connect(app);
      const first = await h.adapter.subscribe({ appId: app, channel: 'room', socketId: a.socketId });
      expect(first).toMatchObject({ occupied: true, subscriptionCount: 1 });
      const second = await h.adapter.subscribe({ appId: app, channel: 'room', socketId: b.socketId });
      expect(second).toMatchObject({ occupied: false, subscriptionCount: 2 });
      expect(await h.adapter.channelInfo(app, 'room', { subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 2 });
      expect(await h.adapter.unsubscribe(app, 'room', a.socketId)).toMatchObject({ vacated: false, subscriptionCount: 1 });
      expect(await h.adapter.unsubscribe(app, 'room', b.socketId)).toMatchObject({ vacated: true, subscriptionCount: 0 });
      expect(await h.adapter.channelInfo(app, 'room', {})).toEqual({ occupied: false });
    });

    it('hands the subscriptions made through it to the debug tap while the app is watched, with the counts', async () => {
      const hub = new DebugHub({ dataDir: `contract-tap-${randomUUID()}` });
      try {
        h.adapter.tapSubscriptions(hub);
        const [a, b] = [await h.connect(app), await h.connect(app)];
        await h.adapter.subscribe({ appId: app, channel: 'unwatched', socketId: a.socketId });
        const seen: DebugEvent[] = [];
        hub.watch(app, (message) => {
          if (message.type === 'event') seen.push(message.event);
        });
        await h.adapter.subscribe({ appId: app, channel: 'room', socketId: a.socketId });
        await h.adapter.subscribe({ appId: app, channel: 'room', socketId: b.socketId }, () => true);
        await h.adapter.unsubscribe(app, 'room', a.socketId);
        expect(seen).toEqual([
          { kind: 'subscription', action: 'subscribed', channel: 'room', socketId: a.socketId, subscriptionCount: 1 },
          { kind: 'subscription', action: 'subscribed', channel: 'room', socketId: b.socketId, subscriptionCount: 2 },
          { kind: 'subscription', action: 'unsubscribed', channel: 'room', socketId: a.socketId, subscriptionCount: 1 },
        ]);
      } finally {
        hub.close();
      }
    });

    it('adds a presence member on its first connection only and removes it with its last', async () => {
      const [a1, a2, b] = [await h.connect(app), await h.connect(app), await h.connect(app)];
      const ada = { userId: 'ada', userInfo: { name: 'Ada' } };
      const join1 = await h.adapter.subscribe({ appId: app, channel: 'presence-lab', socketId: a1.socketId, member: ada });
      expect(join1).toMatchObject({ occupied: true, memberAdded: true, presence: { ids: ['ada'], count: 1, hash: { ada: { name: 'Ada' } } } });
      expect((await h.adapter.subscribe({ appId: app, channel: 'presence-lab', socketId: a2.socketId, member: ada })).memberAdded).toBe(false);
      const joinB = await h.adapter.subscribe({ appId: app, channel: 'presence-lab', socketId: b.socketId, member: { userId: 'bob' } });
      expect(joinB).toMatchObject({ memberAdded: true, presence: { ids: ['ada', 'bob'], count: 2 } });
      expect((await h.adapter.presenceUserIds(app, 'presence-lab')).sort()).toEqual(['ada', 'bob']);
      expect(await h.adapter.channelInfo(app, 'presence-lab', { userCount: true })).toEqual({ occupied: true, userCount: 2 });
      expect((await h.adapter.unsubscribe(app, 'presence-lab', a1.socketId)).memberRemoved).toBe(false);
      expect((await h.adapter.unsubscribe(app, 'presence-lab', a2.socketId)).memberRemoved).toBe(true);
      expect(await h.adapter.presenceUserIds(app, 'presence-lab')).toEqual(['bob']);
    });

    it('lists occupied channels sorted, by prefix, with user counts when asked', async () => {
      const c = await h.connect(app);
      for (const channel of ['zeta', 'alpha', 'presence-b', 'presence-a']) {
        const member = channel.startsWith('presence-') ? { userId: 'u1' } : undefined;
        await h.adapter.subscribe({ appId: app, channel, socketId: c.socketId, ...(member ? { member } : {}) });
      }
      expect(await h.adapter.listChannels(app, undefined, false)).toEqual([
        { channel: 'alpha' }, { channel: 'presence-a' }, { channel: 'presence-b' }, { channel: 'zeta' },
      ]);
      expect(await h.adapter.listChannels(app, 'presence-', true)).toEqual([
        { channel: 'presence-a', userCount: 1 }, { channel: 'presence-b', userCount: 1 },
      ]);
      expect(await h.adapter.listChannels('another-app', undefined, false)).toEqual([]);
    });

    it('counts occupied channels in total and for the apps asked, as they become occupied and vacated', async () => {
      const before = await h.adapter.occupiedChannelCounts([app, 'another-app']);
      expect(before.byApp).toEqual([0, 0]);
      // A signed-in user's connection: whatever the adapter keeps for it is not an app's channel.
      const [c, d] = [await h.connect(app, 'counted-user'), await h.connect(app)];
      for (const channel of ['alpha', 'beta', 'presence-a']) {
        const member = channel.startsWith('presence-') ? { userId: 'u1' } : undefined;
        await h.adapter.subscribe({ appId: app, channel, socketId: c.socketId, ...(member ? { member } : {}) });
      }
      await h.adapter.subscribe({ appId: app, channel: 'alpha', socketId: d.socketId });
      expect(await h.adapter.occupiedChannelCounts([app, 'another-app'])).toEqual({ total: before.total + 3, byApp: [3, 0] });
      await h.adapter.unsubscribe(app, 'alpha', c.socketId);
      expect(await h.adapter.occupiedChannelCounts([app])).toEqual({ total: before.total + 3, byApp: [3] });
      await h.adapter.unsubscribe(app, 'alpha', d.socketId);
      await h.adapter.unsubscribe(app, 'presence-a', c.socketId);
      expect(await h.adapter.occupiedChannelCounts([])).toEqual({ total: before.total + 1, byApp: [] });
      expect(await h.adapter.occupiedChannelCounts([app])).toEqual({ total: before.total + 1, byApp: [1] });
    });

    it('delivers a published frame to attached sockets, except the one named, and stops after detach', async () => {
      const [a, b, c] = [await h.connect(app), await h.connect(app), await h.connect(app)];
      for (const conn of [a, b, c]) {
        const joined = await h.adapter.subscribe({ appId: app, channel: 'news', socketId: conn.socketId });
        expect(h.adapter.attach(conn.socket, app, 'news', joined)).toBeUndefined();
      }
      h.adapter.publish(app, 'news', 'frame-1', a.socketId);
      await until(() => b.frames.includes('frame-1') && c.frames.includes('frame-1'), 'frame-1');
      h.adapter.detach(c.socket, app, 'news');
      h.adapter.publish(app, 'news', 'frame-2');
      await until(() => a.frames.includes('frame-2') && b.frames.includes('frame-2'), 'frame-2');
      // A later frame on another channel is the marker that frame-2 would have arrived by now.
      await h.adapter.subscribe({ appId: app, channel: 'marker', socketId: c.socketId });
      h.adapter.attach(c.socket, app, 'marker');
      h.adapter.publish(app, 'marker', 'marker');
      await until(() => c.frames.includes('marker'), 'marker');
      expect(a.frames).toEqual(['frame-2']);
      expect(c.frames).toEqual(['frame-1', 'marker']);
    });

    it('replays a cache channel\'s last event on attach, null on a miss', async () => {
      const a = await h.connect(app);
      const miss = await h.adapter.subscribe({ appId: app, channel: 'cache-quotes', socketId: a.socketId });
      expect(h.adapter.attach(a.socket, app, 'cache-quotes', miss)).toBeNull();
      h.adapter.storeCachedEvent(app, 'cache-quotes', 'price', '{"p":1}');
      const b = await h.connect(app);
      // The store is a fire-and-forget hand-off: a later join sees it (retried on a slow machine).
      const hit = await until(async () => {
        const joined = await h.adapter.subscribe({ appId: app, channel: 'cache-quotes', socketId: b.socketId });
        if (joined.cached !== null) return joined;
        await h.adapter.unsubscribe(app, 'cache-quotes', b.socketId);
        return null;
      }, 'a join that sees the cached event');
      expect(h.adapter.attach(b.socket, app, 'cache-quotes', hit)).toEqual({ event: 'price', data: '{"p":1}' });
      expect(await h.adapter.channelInfo(app, 'cache-quotes', { cache: true })).toMatchObject({ occupied: true, cache: { data: '{"p":1}' } });
    });

    it('tells watchers when a user comes online and goes offline, and answers who is online', async () => {
      const watcher = await h.connect(app);
      // A probe watches carol before she comes online: its 'online' frame says the adapter has
      // told carol's watchers. A watcher that watched earlier (between a cluster adapter's record
      // in Redis and its telling) would be told too, though its answer already lists carol.
      const probe = await h.connect(app);
      expect(await h.adapter.watch(probe.socket, app, ['carol'])).toEqual([]);
      await h.connect(app, 'carol');
      // As the protocol does on a user's first sign-in; a cluster adapter records it in the background.
      h.adapter.userPresence(app, 'carol', true);
      await until(() => probe.frames.length >= 1, 'the probe told carol came online');
      expect(JSON.parse((JSON.parse(probe.frames[0]!) as { data: string }).data)).toEqual({ events: [{ name: 'online', user_ids: ['carol'] }] });
      expect(await h.adapter.watch(watcher.socket, app, ['carol', 'dave'])).toEqual(['carol']);
      await h.connect(app, 'dave');
      h.adapter.userPresence(app, 'dave', true);
      h.adapter.userPresence(app, 'carol', false);
      await until(() => watcher.frames.length >= 2, 'two watchlist frames');
      const events = watcher.frames.map((f) => {
        const frame = JSON.parse(f) as { event: string; data: string };
        return [frame.event, JSON.parse(frame.data)];
      });
      expect(events).toEqual([
        ['pusher_internal:watchlist_events', { events: [{ name: 'online', user_ids: ['dave'] }] }],
        ['pusher_internal:watchlist_events', { events: [{ name: 'offline', user_ids: ['carol'] }] }],
      ]);
    });

    it('applies every join and every leave of a burst: none refused for being many, no leave lost', async () => {
      const subs = Array.from({ length: 600 }, (_, i) => ({ appId: app, channel: `burst-${i % 20}`, socketId: `900.${i}` }));
      const joined = await Promise.all(subs.map((sub) => h.adapter.subscribe(sub)));
      expect(joined.filter((res) => res.subscriptionCount >= 1)).toHaveLength(600);
      expect(await h.adapter.channelInfo(app, 'burst-7', { subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 30 });
      const left = await Promise.all(subs.map((sub) => h.adapter.unsubscribe(sub.appId, sub.channel, sub.socketId)));
      expect(left.filter((res) => res.vacated)).toHaveLength(20);
      expect(await h.adapter.listChannels(app, 'burst-', false)).toEqual([]);
    });

    it('drops a join its caller no longer wants when it has not been sent (null), or records it', async () => {
      const a = await h.connect(app);
      const res = await h.adapter.subscribe({ appId: app, channel: 'withdrawn', socketId: a.socketId }, () => false);
      // An adapter that sends joins at once never asks and records it; one that queues drops it.
      expect((await h.adapter.channelInfo(app, 'withdrawn', {})).occupied).toBe(res !== null);
      if (res !== null) await h.adapter.unsubscribe(app, 'withdrawn', a.socketId);
      expect(await h.adapter.channelInfo(app, 'withdrawn', {})).toEqual({ occupied: false });
    });

    it('closes every connection of a signed-in user with 4009 and counts connections per app', async () => {
      const [e1, e2, other] = [await h.connect(app, 'erin'), await h.connect(app, 'erin'), await h.connect(app, 'frank')];
      expect(h.adapter.connectionCount(app)).toBe(3);
      expect(await h.adapter.terminateUserConnections(app, 'erin')).toBe(2);
      expect(await e1.closed).toBe(4009);
      expect(await e2.closed).toBe(4009);
      expect(await h.adapter.terminateUserConnections(app, 'nobody')).toBe(0);
      expect(other.frames).toEqual([]);
    });
  });
}
