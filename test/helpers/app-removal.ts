/**
 * An app's live state for the app-removal tests, on one node or several: presence members and
 * plain subscribers (pusher-js, one per user), a cache channel holding an event; what removing
 * the app must produce (every socket closed with 4001, member_removed for every user and
 * channel_vacated for every channel at the webhook URL the app had, signed with its key); and
 * what it must leave behind for an app created again with the same id: nothing, as the channel
 * HTTP API and a new pusher-js member see it.
 */
import { expect } from 'vitest';
import type { ChannelClient, ClientPool } from './channel-clients.js';
import type { HeraldProcess } from './herald-process.js';
import { channelsSdk, type ChannelsCreds } from './sdk-clients.js';
import { until } from './wait.js';
import type { WebhookReceiver } from './webhook-receiver.js';

export const PRESENCE = 'presence-room';
export const PLAIN = 'room';
export const CACHE = 'cache-news';
/** Every channel the state occupies. */
export const CHANNELS = [PRESENCE, PLAIN, CACHE] as const;

/** The `webhooks` entry of an app under test: occupancy and membership at `url`. */
export function removalHook(url: string): { url: string; events: string[] } {
  return { url, events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] };
}

interface HookEvent {
  name: string;
  channel: string;
  user_id?: string;
}

/** The events delivered at `path`, each with the app key its request was signed with. */
function eventsAt(receiver: WebhookReceiver, path: string): (HookEvent & { key: string })[] {
  return receiver.at(path).filter((r) => r.status >= 200 && r.status < 300).flatMap((r) => {
    const body = r.json as { events: HookEvent[] };
    return body.events.map((e) => ({ ...e, key: r.headers['x-pusher-key'] ?? '' }));
  });
}

/**
 * One pusher-js client per user, spread over `nodes` in turn, each a member of PRESENCE and a
 * subscriber of PLAIN; the first also on CACHE, where an event is then triggered (so cached).
 * Resolves once the receiver has every member_added and channel_occupied.
 */
export async function occupy(pool: ClientPool, nodes: readonly HeraldProcess[], users: readonly string[], receiver: WebhookReceiver, path: string): Promise<ChannelClient[]> {
  const clients: ChannelClient[] = [];
  for (const [i, userId] of users.entries()) {
    const client = await pool.connect(nodes[i % nodes.length]!, { userId });
    await client.subscribe(PRESENCE);
    await client.subscribe(PLAIN);
    clients.push(client);
  }
  await clients[0]!.subscribe(CACHE);
  await channelsSdk(nodes[0]!.port, pool.app).trigger(CACHE, 'headline', { n: 1 });
  await until(() => {
    const seen = eventsAt(receiver, path);
    const added = new Set(seen.filter((e) => e.name === 'member_added').map((e) => e.user_id));
    const occupied = new Set(seen.filter((e) => e.name === 'channel_occupied').map((e) => e.channel));
    return users.every((u) => added.has(u)) && CHANNELS.every((c) => occupied.has(c));
  }, `member_added of ${users.length} users and channel_occupied of ${CHANNELS.join(', ')} at ${path}`);
  const cached = (await (await channelsSdk(nodes[0]!.port, pool.app).get({ path: `/channels/${CACHE}`, params: { info: 'cache' } })).json()) as { cache: unknown };
  expect(cached.cache, 'the cache channel holds the event before the removal').not.toBeNull();
  return clients;
}

/** Resolves once every client's connection was closed with 4001 (its pusher:error). */
export async function closedWith4001(clients: readonly ChannelClient[]): Promise<void> {
  await until(() => clients.every((c) => c.errorCodes.includes(4001) && c.state !== 'connected'), () => `every socket closed with 4001 (codes: ${JSON.stringify(clients.map((c) => c.errorCodes))})`);
}

/**
 * Waits for the removal's webhooks at `path`: member_removed for every user on PRESENCE and
 * channel_vacated for every channel, each once, signed with the removed app's `key`.
 */
export async function removalWebhooks(receiver: WebhookReceiver, path: string, users: readonly string[], key: string): Promise<void> {
  const removed = () => eventsAt(receiver, path).filter((e) => e.name === 'member_removed' || e.name === 'channel_vacated');
  await until(() => {
    const seen = removed();
    return users.every((u) => seen.some((e) => e.name === 'member_removed' && e.user_id === u)) && CHANNELS.every((c) => seen.some((e) => e.name === 'channel_vacated' && e.channel === c));
  }, () => `member_removed of every user and channel_vacated of every channel at ${path}; got ${JSON.stringify(removed())}`);
  const seen = removed();
  expect(seen.filter((e) => e.name === 'member_removed').map((e) => `${e.channel}/${e.user_id}`).sort()).toEqual(users.map((u) => `${PRESENCE}/${u}`).sort());
  expect(seen.filter((e) => e.name === 'channel_vacated').map((e) => e.channel).sort()).toEqual([...CHANNELS].sort());
  expect(new Set(seen.map((e) => e.key))).toEqual(new Set([key]));
}

/**
 * The app created again under the same id (the pool's) has nothing of the old one, as the
 * channel HTTP API of each node answers: no occupied channel, no member, no count, no cached
 * event; and a new member (through the first node) sees only itself.
 */
export async function startsEmpty(pool: ClientPool, nodes: readonly HeraldProcess[]): Promise<void> {
  for (const node of nodes) {
    const sdk = channelsSdk(node.port, pool.app as ChannelsCreds);
    const json = async (path: string, info?: string): Promise<Record<string, unknown>> => (await (await sdk.get({ path, ...(info && { params: { info } }) })).json()) as Record<string, unknown>;
    expect(await json('/channels')).toEqual({ channels: {} });
    expect(await json(`/channels/${PRESENCE}`, 'user_count')).toEqual({ occupied: false, user_count: 0 });
    expect(await json(`/channels/${PRESENCE}/users`)).toEqual({ users: [] });
    expect(await json(`/channels/${PLAIN}`, 'subscription_count')).toEqual({ occupied: false, subscription_count: 0 });
    expect(await json(`/channels/${CACHE}`, 'cache')).toEqual({ occupied: false, cache: null });
  }
  const fresh = await pool.connect(nodes[0]!, { userId: 'fresh' });
  const presence = await fresh.subscribe(PRESENCE);
  expect(presence.memberIds()).toEqual(['fresh']);
}
