/**
 * The channel handlers of one shard (createChannelArea) over a real LMDB environment, with a
 * recording webhook emitter standing in for the outbox area: what each request answers, the
 * webhooks it emits in order, the silent restore, the occupancy record a restarted worker
 * reads back (member_removed then channel_vacated for what its predecessor left occupied), an
 * app's removal (its state dropped with the webhooks of its last members and channels), and
 * front-end threads: digest and reconcile of one thread's subscribers, and the drop of a thread
 * that is gone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createChannelArea } from '../../../src/channels/shard-handlers.js';
import type { ChannelShardApi } from '../../../src/channels/messages.js';
import { newSocketId } from '../../../src/channels/socket-id.js';
import { configSchema } from '../../../src/config/schema.js';
import type { ShardArea, ShardContext } from '../../../src/shards/context.js';
import { openShardDatabase } from '../../../src/shards/storage.js';
import type { ChannelEventBody, ChannelEventOptions, ChannelWebhookEvent, WebhookEmitter } from '../../../src/webhooks/emitter.js';

class RecordingEmitter implements WebhookEmitter {
  readonly channel: (ChannelWebhookEvent & { options?: ChannelEventOptions })[] = [];
  channelEvent(e: ChannelWebhookEvent, options?: ChannelEventOptions): void {
    this.channel.push(options ? { ...e, options } : e);
  }
  pushEvent(): void {}
}

const HOOKED = 'hooked';
const QUIET = 'quiet';

let dir: string;
let root: RootDatabase;
let ctx: ShardContext;
let emitter: RecordingEmitter;
let area: ShardArea<ChannelShardApi>;

function openArea(): void {
  root = openShardDatabase(join(dir, 'shard-0'));
  ctx = { ...ctx, root };
  emitter = new RecordingEmitter();
  area = createChannelArea(ctx, emitter);
}

async function closeArea(): Promise<void> {
  await area.close?.();
  await root.flushed;
  await root.close();
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-channel-area-'));
  const config = {
    ...configSchema.parse({
      dataDir: dir,
      apps: [
        { id: HOOKED, key: 'k1', secret: 's1', subscriptionCount: true, maxPresenceMembers: 2, webhooks: [{ url: 'http://127.0.0.1:9/hook' }] },
        { id: QUIET, key: 'k2', secret: 's2' },
      ],
    }),
    shards: 1,
    frontEndThreads: 1,
  };
  ctx = { shardIndex: 0, shardCount: 1, dataDir: dir, config, installSecret: '00'.repeat(32), root: undefined as unknown as RootDatabase, testHooks: false, onServing: (run) => run() };
  openArea();
});

afterEach(async () => {
  await closeArea();
  rmSync(dir, { recursive: true, force: true });
});

const h = () => area.handlers;
/** Runs a handler as the worker does: a throw becomes a rejection. */
const call = async <T>(run: () => T | Promise<T>): Promise<T> => run();
const events = (): ChannelEventBody[] => emitter.channel.map((e) => e.event);

describe('channel shard handlers', () => {
  it('answers joins and leaves with counts and transitions, and emits their webhooks in order', async () => {
    expect(await h()['channels.subscribe']({ appId: HOOKED, channel: 'room', socketId: '1.1' })).toEqual({ subscriptionCount: 1, occupied: true });
    expect(await h()['channels.subscribe']({ appId: HOOKED, channel: 'room', socketId: '1.2' })).toEqual({ subscriptionCount: 2, occupied: false });
    // A repeated join changes nothing and emits nothing.
    expect(await h()['channels.subscribe']({ appId: HOOKED, channel: 'room', socketId: '1.2' })).toEqual({ subscriptionCount: 2, occupied: false });
    expect(await h()['channels.unsubscribe']({ appId: HOOKED, channel: 'room', socketId: '1.1' })).toEqual({ subscriptionCount: 1, vacated: false });
    expect(await h()['channels.unsubscribe']({ appId: HOOKED, channel: 'room', socketId: '1.2' })).toEqual({ subscriptionCount: 0, vacated: true });
    expect(await h()['channels.unsubscribe']({ appId: HOOKED, channel: 'room', socketId: '1.2' })).toEqual({ subscriptionCount: 0, vacated: false });
    expect(events()).toEqual([
      { name: 'channel_occupied', channel: 'room' },
      { name: 'subscription_count', channel: 'room', subscription_count: 1 },
      { name: 'subscription_count', channel: 'room', subscription_count: 2 },
      { name: 'subscription_count', channel: 'room', subscription_count: 1 },
      { name: 'subscription_count', channel: 'room', subscription_count: 0 },
      { name: 'channel_vacated', channel: 'room' },
    ]);
  });

  it('keeps presence members per user, refuses one over the limit, and emits nothing for apps without webhooks', async () => {
    const join = (socketId: string, userId: string) =>
      h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-lab', socketId, member: { userId, userInfo: { n: userId } } });
    expect(await join('1.1', 'ada')).toEqual({ subscriptionCount: 1, occupied: true, memberAdded: true, presence: '{"ids":["ada"],"hash":{"ada":{"n":"ada"}},"count":1}' });
    expect(await join('1.2', 'ada')).toMatchObject({ memberAdded: false });
    expect(JSON.parse(((await join('1.3', 'bob')) as { presence: string }).presence)).toEqual({
      ids: ['ada', 'bob'],
      hash: { ada: { n: 'ada' }, bob: { n: 'bob' } },
      count: 2,
    });
    await expect(call(() => join('1.4', 'cyd'))).rejects.toMatchObject({ code: 'PRESENCE_MEMBER_LIMIT' });
    expect(await h()['channels.unsubscribe']({ appId: HOOKED, channel: 'presence-lab', socketId: '1.1' })).toMatchObject({ memberRemoved: false });
    expect(await h()['channels.unsubscribe']({ appId: HOOKED, channel: 'presence-lab', socketId: '1.2' })).toMatchObject({ memberRemoved: true });
    expect(await h()['channels.users']({ appId: HOOKED, channel: 'presence-lab' })).toEqual({ userIds: ['bob'] });
    expect(events().filter((e) => e.name.startsWith('member_'))).toEqual([
      { name: 'member_added', channel: 'presence-lab', user_id: 'ada' },
      { name: 'member_added', channel: 'presence-lab', user_id: 'bob' },
      { name: 'member_removed', channel: 'presence-lab', user_id: 'ada' },
    ]);
    emitter.channel.length = 0;
    await h()['channels.subscribe']({ appId: QUIET, channel: 'presence-lab', socketId: '2.1', member: { userId: 'zed' } });
    expect(emitter.channel).toEqual([]);
  });

  it('answers info, lists by prefix, keeps the cache with its TTL and reports a cache miss', async () => {
    const miss = await h()['channels.subscribe']({ appId: HOOKED, channel: 'cache-q', socketId: '1.1' });
    expect(miss.cached).toBeNull();
    expect(events()).toContainEqual({ name: 'cache_miss', channel: 'cache-q' });
    await h()['channels.storeCache']({ appId: HOOKED, channel: 'cache-q', event: 'e', data: 'd' });
    expect((await h()['channels.subscribe']({ appId: HOOKED, channel: 'cache-q', socketId: '1.2' })).cached).toEqual({ event: 'e', data: 'd' });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-p', socketId: '1.1', member: { userId: 'u' } });
    expect(await h()['channels.info']({ appId: HOOKED, channel: 'cache-q', subscriptionCount: true, cache: true })).toMatchObject({
      occupied: true, subscriptionCount: 2, cache: { data: 'd' },
    });
    expect(await h()['channels.list']({ appId: HOOKED, withUserCount: false })).toEqual({ names: ['cache-q', 'presence-p'], userCounts: null });
    expect(await h()['channels.list']({ appId: HOOKED, prefix: 'presence-', withUserCount: true })).toEqual({ names: ['presence-p'], userCounts: [1] });
    await expect(call(() => h()['channels.info']({ appId: 'nope', channel: 'x' }))).resolves.toEqual({ occupied: false });
    await expect(call(() => h()['channels.subscribe']({ appId: 'nope', channel: 'x', socketId: '9.9' }))).rejects.toMatchObject({ code: 'APP_NOT_FOUND' });
  });

  it('applies a membership batch in order, one refused op failing alone; reconciles with the front end\'s list', async () => {
    const member = (userId: string) => ({ userId, userInfo: null });
    const { results } = await h()['channels.memberships']({
      ops: [
        { join: { appId: HOOKED, channel: 'presence-lab', socketId: '1.1', member: member('ada') } },
        { join: { appId: HOOKED, channel: 'presence-lab', socketId: '1.2', member: member('bob') } },
        { join: { appId: HOOKED, channel: 'presence-lab', socketId: '1.3', member: member('cyd') } },
        { leave: { appId: HOOKED, channel: 'presence-lab', socketId: '1.2' } },
        { join: { appId: HOOKED, channel: 'room', socketId: '1.1' } },
      ],
    });
    expect(results.map((r) => (r.ok ? 'ok' : r.code))).toEqual(['ok', 'ok', 'PRESENCE_MEMBER_LIMIT', 'ok', 'ok']);
    expect(results[3]).toEqual({ ok: true, value: { subscriptionCount: 1, vacated: false, memberRemoved: true } });
    expect(await h()['channels.digest']({})).toMatchObject({ count: 2 });
    emitter.channel.length = 0;
    // The front end holds ada on presence-lab and a room subscription the shard lacks; 1.1 on room is a ghost.
    const res = await h()['channels.reconcile']({
      session: 1,
      last: true,
      subscriptions: [
        { appId: HOOKED, channel: 'presence-lab', socketId: '1.1', member: member('ada') },
        { appId: HOOKED, channel: 'room', socketId: '1.9' },
      ],
    });
    expect(res).toEqual({ removed: [{ appId: HOOKED, channel: 'room', subscriptionCount: 0 }], restored: 1 });
    // The ghost's removal emits what a leave does; the restore is silent.
    expect(events()).toEqual([
      { name: 'subscription_count', channel: 'room', subscription_count: 0 },
      { name: 'channel_vacated', channel: 'room' },
    ]);
    expect(await h()['channels.info']({ appId: HOOKED, channel: 'room', subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 1 });
  });

  it('digests and reconciles one front-end thread\'s subscribers, leaving the other thread\'s alone', async () => {
    const [zero, one, oneGhost] = [newSocketId(0), newSocketId(1), newSocketId(1)];
    for (const socketId of [zero, one, oneGhost]) await h()['channels.subscribe']({ appId: HOOKED, channel: 'room', socketId });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-lab', socketId: zero, member: { userId: 'ada' } });
    expect(await h()['channels.digest']({})).toMatchObject({ count: 4 });
    expect(await h()['channels.digest']({ frontEnd: 0 })).toMatchObject({ count: 2 });
    expect(await h()['channels.digest']({ frontEnd: 1 })).toMatchObject({ count: 2 });
    emitter.channel.length = 0;
    // Front end 1 holds `one` only: its ghost goes; front end 0's subscribers, not listed, stay.
    const res = await h()['channels.reconcile']({ session: 1, last: true, frontEnd: 1, subscriptions: [{ appId: HOOKED, channel: 'room', socketId: one }] });
    expect(res).toEqual({ removed: [{ appId: HOOKED, channel: 'room', subscriptionCount: 2 }], restored: 0 });
    expect(events()).toEqual([{ name: 'subscription_count', channel: 'room', subscription_count: 2 }]);
    expect(await h()['channels.users']({ appId: HOOKED, channel: 'presence-lab' })).toEqual({ userIds: ['ada'] });
    expect(await h()['channels.digest']({ frontEnd: 0 })).toMatchObject({ count: 2 });
  });

  it('drops a front-end thread that is gone: its subscribers leave with their webhooks and frames, the other thread\'s stay', async () => {
    const [zero, one, oneAgain] = [newSocketId(0), newSocketId(1), newSocketId(1)];
    const join = (socketId: string, channel: string, userId?: string) =>
      h()['channels.subscribe']({ appId: HOOKED, channel, socketId, ...(userId === undefined ? {} : { member: { userId } }) });
    await join(zero, 'room');
    await join(one, 'room');
    await join(one, 'alone');
    await join(zero, 'presence-lab', 'ada');
    await join(one, 'presence-lab', 'bob');
    await join(oneAgain, 'presence-lab', 'ada'); // ada's second connection: she stays a member
    emitter.channel.length = 0;
    const { removed } = await h()['channels.dropFrontEnd']({ frontEnd: 1 });
    expect(removed).toHaveLength(4);
    expect(removed).toEqual(
      expect.arrayContaining([
        { appId: HOOKED, channel: 'room', subscriptionCount: 1 },
        { appId: HOOKED, channel: 'alone', subscriptionCount: 0 },
        { appId: HOOKED, channel: 'presence-lab', memberRemoved: 'bob' },
        { appId: HOOKED, channel: 'presence-lab' },
      ]),
    );
    // What leaves emit, raw (the webhook area's leave debounce holds member_removed and channel_vacated).
    expect(events()).toEqual(
      expect.arrayContaining([
        { name: 'subscription_count', channel: 'room', subscription_count: 1 },
        { name: 'subscription_count', channel: 'alone', subscription_count: 0 },
        { name: 'channel_vacated', channel: 'alone' },
        { name: 'member_removed', channel: 'presence-lab', user_id: 'bob' },
      ]),
    );
    expect(events()).toHaveLength(4);
    expect(await h()['channels.users']({ appId: HOOKED, channel: 'presence-lab' })).toEqual({ userIds: ['ada'] });
    expect(await h()['channels.info']({ appId: HOOKED, channel: 'alone' })).toEqual({ occupied: false });
    expect(await h()['channels.digest']({ frontEnd: 1 })).toEqual({ count: 0, sum: 0, xor: 0 });
    expect(await h()['channels.digest']({ frontEnd: 0 })).toMatchObject({ count: 2 });
    expect(await h()['channels.dropFrontEnd']({ frontEnd: 1 })).toEqual({ removed: [] });
  });

  it('relays a client event to the client_event webhook with the sender', async () => {
    await h()['channels.clientEvent']({ appId: HOOKED, channel: 'private-c', event: 'client-x', data: '{}', socketId: '1.1', userId: 'ada' });
    expect(events()).toEqual([{ name: 'client_event', channel: 'private-c', event: 'client-x', data: '{}', socket_id: '1.1', user_id: 'ada' }]);
  });

  it('after a restart, vacates what the previous worker left occupied, unless a restore takes it back silently', async () => {
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '1.1', member: { userId: 'ada' } });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'b', socketId: '1.1' });
    await closeArea(); // the worker is gone, its memory with it; the record stays
    openArea();
    const recovered = events();
    expect(recovered).toHaveLength(3);
    expect(recovered).toContainEqual({ name: 'channel_vacated', channel: 'b' });
    // A channel's members leave before it is vacated, as in a real leave.
    const removed = recovered.findIndex((e) => e.name === 'member_removed' && e.channel === 'presence-a' && e.user_id === 'ada');
    const vacated = recovered.findIndex((e) => e.name === 'channel_vacated' && e.channel === 'presence-a');
    expect(removed).toBeGreaterThanOrEqual(0);
    expect(vacated).toBeGreaterThan(removed);
    emitter.channel.length = 0;
    const restored = await h()['channels.restore']({
      appId: HOOKED,
      subscriptions: [{ channel: 'presence-a', socketId: '1.1', member: { userId: 'ada' } }, { channel: 'c', socketId: '1.1' }],
    });
    expect(restored).toEqual({ restored: 2 });
    // Only what cancels an emitted vacated / member_removed in the debounce; 'c' is silent.
    expect(events()).toEqual([
      { name: 'channel_occupied', channel: 'presence-a' },
      { name: 'member_added', channel: 'presence-a', user_id: 'ada' },
    ]);
    expect(await h()['channels.users']({ appId: HOOKED, channel: 'presence-a' })).toEqual({ userIds: ['ada'] });
  });

  it('holds the leaves it found until the server serves; a join or restore before then takes them back, and neither goes out', async () => {
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '1.1', member: { userId: 'ada' } });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '1.2', member: { userId: 'bob' } });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'b', socketId: '1.1' });
    await h()['channels.subscribe']({ appId: HOOKED, channel: 'c', socketId: '1.1' });
    await closeArea();
    // The next start: its front ends are not all listening yet.
    const waiting: (() => void)[] = [];
    ctx = { ...ctx, onServing: (run) => void waiting.push(run) };
    openArea();
    expect(events()).toEqual([]);
    // One front end serves already: ada joins again there, and 'b' is restored.
    const join = await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '2.1', member: { userId: 'ada' } });
    expect(join).toMatchObject({ occupied: true, memberAdded: true });
    expect(await h()['channels.restore']({ appId: HOOKED, subscriptions: [{ channel: 'b', socketId: '2.1' }] })).toEqual({ restored: 1 });
    // For the receiver presence-a and b never emptied and ada never left: nothing about them.
    expect(events().filter((e) => e.name !== 'subscription_count')).toEqual([]);
    // Every front end serves: what nobody took back goes out.
    for (const run of waiting) run();
    const released = events().filter((e) => e.name !== 'subscription_count');
    expect(released).toHaveLength(2);
    expect(released).toContainEqual({ name: 'member_removed', channel: 'presence-a', user_id: 'bob' });
    expect(released).toContainEqual({ name: 'channel_vacated', channel: 'c' });
  });

  describe('an app removed', () => {
    /** A member of presence-a and subscribers of b and cache-c, whose event is cached. */
    async function occupy(): Promise<void> {
      await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '1.1', member: { userId: 'ada' } });
      await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '1.2', member: { userId: 'bob' } });
      await h()['channels.subscribe']({ appId: HOOKED, channel: 'b', socketId: '1.1' });
      await h()['channels.subscribe']({ appId: HOOKED, channel: 'cache-c', socketId: '1.2' });
      await h()['channels.storeCache']({ appId: HOOKED, channel: 'cache-c', event: 'e', data: 'd' });
      await h()['channels.subscribe']({ appId: QUIET, channel: 'b', socketId: '2.1' });
      emitter.channel.length = 0;
    }

    /** Its members removed and channels vacated, as the removed app's (retired) events; nothing left, even after a restart. */
    async function expectRemoved(): Promise<void> {
      expect(emitter.channel.every((e) => e.appId === HOOKED && e.options?.retired === true)).toBe(true);
      expect(events()).toEqual([
        { name: 'member_removed', channel: 'presence-a', user_id: 'ada' },
        { name: 'member_removed', channel: 'presence-a', user_id: 'bob' },
        { name: 'channel_vacated', channel: 'presence-a' },
        { name: 'channel_vacated', channel: 'b' },
        { name: 'channel_vacated', channel: 'cache-c' },
      ]);
      emitter.channel.length = 0;
      // The sockets' leaves come after the removal: they change nothing and emit nothing.
      expect(await h()['channels.memberships']({ ops: [{ leave: { appId: HOOKED, channel: 'presence-a', socketId: '1.1' } }] })).toEqual({
        results: [{ ok: true, value: { subscriptionCount: 0, vacated: false, memberRemoved: false } }],
      });
      // Another app keeps its state.
      expect(await h()['channels.info']({ appId: QUIET, channel: 'b', subscriptionCount: true })).toEqual({ occupied: true, subscriptionCount: 1 });
      // Nothing is left in the occupancy record either: a restarted worker vacates nothing of it.
      await closeArea();
      openArea();
      expect(events()).toEqual([]);
    }

    /** The app back under the same id: empty. */
    async function expectEmpty(): Promise<void> {
      expect(await h()['channels.list']({ appId: HOOKED, withUserCount: false })).toEqual({ names: [], userCounts: null });
      expect(await h()['channels.users']({ appId: HOOKED, channel: 'presence-a' })).toEqual({ userIds: [] });
      expect(await h()['channels.info']({ appId: HOOKED, channel: 'cache-c', subscriptionCount: true, cache: true })).toEqual({ occupied: false, subscriptionCount: 0, cache: null });
      const join = await h()['channels.subscribe']({ appId: HOOKED, channel: 'presence-a', socketId: '3.1', member: { userId: 'eve' } });
      expect(join).toMatchObject({ occupied: true, memberAdded: true, presence: '{"ids":["eve"],"hash":{"eve":null},"count":1}' });
    }

    it('at run time (admin API delete): members removed and channels vacated with retired webhooks, nothing left for the id', async () => {
      await occupy();
      const hooked = ctx.config.apps.find((a) => a.id === HOOKED)!;
      area.tenantsChanged!({ removedApps: [HOOKED] }, ctx.config);
      await expectRemoved();
      area.tenantsChanged!({ apps: [hooked] }, ctx.config);
      await expectEmpty();
    });

    it('by a reloaded config without it: the same', async () => {
      await occupy();
      area.reload!({ ...ctx.config, apps: ctx.config.apps.filter((a) => a.id !== HOOKED) });
      await expectRemoved();
      await expectEmpty();
    });
  });
});
