/**
 * Channel webhooks in a cluster (issue 14): occupied / vacated / member_added / member_removed /
 * subscription_count are decided once in Redis and sent once per cluster, however the
 * subscribers are spread over the nodes; the leave debounce holds across nodes (a leave on one
 * node and a join on another within it send nothing). A real local receiver records the posts
 * and the official `pusher` SDK checks their signatures.
 */
import { describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import { distinctEvents, eventLabel } from '../helpers/herald-cluster.js';
import { clusterWebhookBed } from '../helpers/cluster-webhooks.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { sleep, until } from '../helpers/wait.js';

const CREDS = { id: 'wh-app', key: 'wh-key', secret: 'wh-secret' };
const SIGNER = new Pusher({ appId: CREDS.id, key: CREDS.key, secret: CREDS.secret, host: '127.0.0.1' });
const DELIVERY = { batchWindowMs: 50, retryBaseMs: 50, maxAttempts: 30, timeoutMs: 2000 };

type WebhookEvent = Record<string, unknown> & { name: string; channel: string };

const setup = clusterWebhookBed('webhooks', CREDS);
const { bed, pool } = setup;

function apps(): Record<string, unknown>[] {
  return [{ ...CREDS, subscriptionCount: true, clientEvents: true, webhooks: [{ url: setup.receiver.url('/pusher') }] }];
}

/** Every delivered event (redeliveries once) on channels whose name contains `tag`, each request's signature checked. */
function events(tag: string): WebhookEvent[] {
  const all = setup.receiver.delivered().flatMap((req) => {
    const hook = SIGNER.webhook({ headers: req.headers, rawBody: req.rawBody });
    expect(hook.isValid(), `signature of ${req.rawBody}`).toBe(true);
    return hook.getEvents() as unknown as WebhookEvent[];
  });
  return distinctEvents(all).filter((e) => e.channel.includes(tag));
}

const label = (e: WebhookEvent): string =>
  `${eventLabel(e)}${e.subscription_count !== undefined ? `=${String(e.subscription_count)}` : ''}`;

/** Labels of the events on `tag`'s channels, without subscription_count ones. */
function transitions(tag: string): string[] {
  return events(tag).filter((e) => e.name !== 'subscription_count').map(label);
}

/** Waits until `wanted` was delivered `times` times (in all) on `tag`'s channels. */
async function webhook(tag: string, wanted: string, timeoutMs = 8000, times = 1): Promise<void> {
  await until(() => events(tag).map(label).filter((l) => l === wanted).length >= times, `webhook ${wanted} (${times})`, timeoutMs);
}

/** Whether `channel` is occupied, as `node` answers (C4: shared state). */
async function occupied(node: HeraldProcess, channel: string): Promise<boolean> {
  return ((await (await pool.sdk(node).get({ path: `/channels/${channel}` })).json()) as { occupied: boolean }).occupied;
}

describe('channel webhooks, no debounce', () => {
  it('occupied, vacated, member_added, member_removed and subscription_count come once per cluster', async () => {
    const cluster = await bed.start({ apps: apps(), config: { webhookDelivery: { ...DELIVERY, pageReloadDebounceMs: 0 } } });
    const aliceA = await pool.connect(cluster.a, { userId: 'alice' });
    const aliceB = await pool.connect(cluster.b, { userId: 'alice' });
    const bobB = await pool.connect(cluster.b, { userId: 'bob' });

    // Presence: alice on both nodes, bob on B.
    await aliceA.subscribe('presence-c1-room');
    // Left by alice's connection on node A right after the room: once it is empty, node A has applied the room's leave too.
    await aliceA.subscribe('c1-room-left-a');
    await webhook('presence-c1', 'member_added:presence-c1-room:alice');
    await aliceB.subscribe('presence-c1-room');
    await bobB.subscribe('presence-c1-room');
    await webhook('presence-c1', 'member_added:presence-c1-room:bob');
    // alice is still there through node B: this leave decides nothing (the list below has no second member_removed).
    aliceA.unsubscribe('presence-c1-room');
    aliceA.unsubscribe('c1-room-left-a');
    await until(async () => !(await occupied(cluster.a, 'c1-room-left-a')), "alice's leave through node A applied");
    aliceB.unsubscribe('presence-c1-room');
    await webhook('presence-c1', 'member_removed:presence-c1-room:alice');
    bobB.unsubscribe('presence-c1-room');
    await webhook('presence-c1', 'channel_vacated:presence-c1-room');

    // A plain channel: subscribed on A then B, left on A then B, each step's count awaited.
    await aliceA.subscribe('c1-plain');
    await webhook('c1-plain', 'subscription_count:c1-plain=1');
    await aliceB.subscribe('c1-plain');
    await webhook('c1-plain', 'subscription_count:c1-plain=2');
    aliceA.unsubscribe('c1-plain');
    await webhook('c1-plain', 'subscription_count:c1-plain=1', 8000, 2);
    aliceB.unsubscribe('c1-plain');
    await webhook('c1-plain', 'channel_vacated:c1-plain');

    // Two nodes joining and leaving the same channel at the same moment.
    await Promise.all([aliceA.subscribe('c1-race'), bobB.subscribe('c1-race')]);
    await webhook('c1-race', 'channel_occupied:c1-race');
    aliceA.unsubscribe('c1-race');
    bobB.unsubscribe('c1-race');
    await webhook('c1-race', 'channel_vacated:c1-race');

    // One user's connections on two nodes joining and leaving at the same moment; a client event.
    const [raceA] = await Promise.all([aliceA.subscribe('presence-race1'), aliceB.subscribe('presence-race1')]);
    await webhook('presence-race1', 'member_added:presence-race1:alice');
    expect(raceA.channel.trigger('client-hello', { from: 'A' })).toBe(true);
    await until(() => events('presence-race1').some((e) => e.name === 'client_event'), 'client_event webhook');
    aliceA.unsubscribe('presence-race1');
    aliceB.unsubscribe('presence-race1');
    await webhook('presence-race1', 'channel_vacated:presence-race1');

    await setup.markersDelivered([cluster.a, cluster.b], 'end');
    expect(transitions('presence-c1')).toEqual([
      'channel_occupied:presence-c1-room',
      'member_added:presence-c1-room:alice',
      'member_added:presence-c1-room:bob',
      'member_removed:presence-c1-room:alice',
      'member_removed:presence-c1-room:bob',
      'channel_vacated:presence-c1-room',
    ]);
    expect(events('c1-plain').map(label)).toEqual([
      'channel_occupied:c1-plain',
      'subscription_count:c1-plain=1',
      'subscription_count:c1-plain=2',
      'subscription_count:c1-plain=1',
      'subscription_count:c1-plain=0',
      'channel_vacated:c1-plain',
    ]);
    expect(transitions('c1-race')).toEqual(['channel_occupied:c1-race', 'channel_vacated:c1-race']);
    expect(transitions('presence-race1')).toEqual([
      'channel_occupied:presence-race1',
      'member_added:presence-race1:alice',
      'client_event:presence-race1:alice',
      'member_removed:presence-race1:alice',
      'channel_vacated:presence-race1',
    ]);
    expect(events('presence-race1').find((e) => e.name === 'client_event')).toMatchObject({ event: 'client-hello', data: JSON.stringify({ from: 'A' }), socket_id: aliceA.socketId });
  });
});

describe('channel webhooks, leave debounce across nodes', () => {
  const DEBOUNCE_MS = 2000;

  it('a leave on node A and a join on node B within the debounce send neither vacated nor occupied', async () => {
    const cluster = await bed.start({ apps: apps(), config: { webhookDelivery: { ...DELIVERY, pageReloadDebounceMs: DEBOUNCE_MS } } });
    const first = await pool.connect(cluster.a, { userId: 'carol' });
    await first.subscribe('presence-c2-reload');
    await first.subscribe('c2-plain-reload');
    await webhook('c2-', 'member_added:presence-c2-reload:carol');
    await webhook('c2-', 'channel_occupied:c2-plain-reload');
    const before = transitions('c2-');
    expect(before.sort()).toEqual(['channel_occupied:c2-plain-reload', 'channel_occupied:presence-c2-reload', 'member_added:presence-c2-reload:carol']);

    // The page reloads: its connection on node A goes, the new one lands on node B.
    const left = Date.now();
    first.disconnect();
    const second = await pool.connect(cluster.b, { userId: 'carol' });
    await second.subscribe('presence-c2-reload');
    await second.subscribe('c2-plain-reload');
    expect(Date.now() - left, 'the rejoin must land within the debounce for this test to mean anything').toBeLessThan(DEBOUNCE_MS);
    // time: the debounce runs out meanwhile; what it held is not sent after it either.
    await sleep(DEBOUNCE_MS + 1000);
    await setup.markersDelivered([cluster.a, cluster.b], 'rejoin');
    expect(transitions('c2-').sort()).toEqual(before);

    // A real leave is sent once the debounce has passed, once.
    const gone = Date.now();
    second.disconnect();
    await webhook('c2-', 'channel_vacated:presence-c2-reload', DEBOUNCE_MS + 8000);
    await webhook('c2-', 'channel_vacated:c2-plain-reload', DEBOUNCE_MS + 8000);
    expect(Date.now() - gone).toBeGreaterThanOrEqual(DEBOUNCE_MS - 50);
    await setup.markersDelivered([cluster.a, cluster.b], 'left');
    expect(transitions('c2-').slice(before.length).sort()).toEqual(['channel_vacated:c2-plain-reload', 'channel_vacated:presence-c2-reload', 'member_removed:presence-c2-reload:carol']);
  });
});
