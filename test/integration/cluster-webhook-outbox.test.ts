/**
 * The cluster's webhook outbox is shared and durable in Redis (issue 23, docs/webhooks.md
 * "In a cluster"): with the receiver failing, the node that decided a channel_vacated and the
 * node holding a debounced member_removed / channel_vacated are killed with SIGKILL and their
 * data dirs deleted; once the receiver answers again, the surviving node delivers every webhook,
 * each with the id it was first attempted with.
 */
import { describe, expect, it } from 'vitest';
import { eventLabel, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { clusterWebhookBed } from '../helpers/cluster-webhooks.js';
import { until } from '../helpers/wait.js';

const APP = { id: 'ob-app', key: 'ob-key', secret: 'ob-secret' };
const setup = clusterWebhookBed('outbox', APP);
const { bed, pool } = setup;

type Hook = Record<string, unknown> & { id: string };

/** Every event of every request the receiver got (answered or failed), with its answer. */
function attempts(): { event: Hook; ok: boolean }[] {
  return setup.receiver.requests.flatMap((r) => (JSON.parse(r.rawBody) as { events: Hook[] }).events.map((event) => ({ event, ok: r.status >= 200 && r.status < 300 })));
}

describe.skipIf(ONE_PROCESS)('shared webhook outbox', () => {
  it('delivers every webhook, with its id, after the deciding and the holding nodes are killed and their disks deleted', async () => {
    const webhooks = [{ url: setup.receiver.url('/outbox'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
    const cluster = await bed.start({
      nodes: 3,
      apps: [{ ...APP, webhooks }],
      config: { webhookDelivery: { batchWindowMs: 20, pageReloadDebounceMs: 1500, retryBaseMs: 50, maxAttempts: 1000, timeoutMs: 2000 } },
    });
    setup.receiver.failAll(503);
    const onA = await pool.connect(cluster.a, { userId: 'ua' });
    const onB = await pool.connect(cluster.b, { userId: 'ub' });
    await onA.subscribe('presence-ob-decided');
    await onB.subscribe('presence-ob-held');
    const attempted = (label: string): Hook | undefined => attempts().find((a) => eventLabel(a.event) === label)?.event;
    await until(() => attempted('member_added:presence-ob-decided:ua') !== undefined && attempted('member_added:presence-ob-held:ub') !== undefined, 'first attempts of the joins', 15_000);

    // A decides the vacate of its channel; its debounce ends and it is attempted (and refused).
    onA.unsubscribe('presence-ob-decided');
    await until(() => attempted('channel_vacated:presence-ob-decided') !== undefined, 'an attempt of the decided vacate', 15_000);
    // B's leave is held by the leave debounce when B dies: node C already sees the channel empty.
    onB.unsubscribe('presence-ob-held');
    const sdkC = pool.sdk(cluster.c);
    await until(async () => !((await (await sdkC.get({ path: '/channels/presence-ob-held' })).json()) as { occupied: boolean }).occupied, "node B's leave seen by node C");
    await Promise.all([cluster.a.dispose(), cluster.b.dispose()]);

    // Node C alone: it takes over what A and B held and releases B's held leave.
    setup.receiver.failAll(false);
    const due = [
      'member_added:presence-ob-decided:ua',
      'member_added:presence-ob-held:ub',
      'channel_occupied:presence-ob-decided',
      'channel_occupied:presence-ob-held',
      'member_removed:presence-ob-decided:ua',
      'channel_vacated:presence-ob-decided',
      'member_removed:presence-ob-held:ub',
      'channel_vacated:presence-ob-held',
    ];
    const delivered = (): Hook[] => attempts().filter((a) => a.ok).map((a) => a.event);
    await until(() => due.every((l) => delivered().some((e) => eventLabel(e) === l)), `delivery of ${due.join(', ')}`, 40_000);
    // Each with the id of its first attempt: every id attempted was delivered, and one id per event.
    const attemptedIds = new Set(attempts().map((a) => a.event.id));
    const deliveredIds = new Set(delivered().map((e) => e.id));
    expect([...attemptedIds].filter((id) => !deliveredIds.has(id))).toEqual([]);
    const idsPerLabel = new Map<string, Set<string>>();
    for (const { event } of attempts()) idsPerLabel.set(eventLabel(event), (idsPerLabel.get(eventLabel(event)) ?? new Set()).add(event.id));
    for (const label of due) expect(idsPerLabel.get(label)?.size, label).toBe(1);
  }, 120_000);

  it('a node whose config lacks the receiver leaves its webhooks to one that has it', async () => {
    const webhooks = [{ url: setup.receiver.url('/known'), events: ['channel_occupied'] }];
    // Node B's config has the app without its receiver (a reload that reached one node only).
    const cluster = await bed.start({
      apps: [{ ...APP, webhooks }],
      perNode: [undefined, { apps: [APP] }],
      config: { webhookDelivery: { batchWindowMs: 20, pageReloadDebounceMs: 0, retryBaseMs: 50, maxAttempts: 3 } },
    });
    const client = await pool.connect(cluster.a, { userId: 'uk' });
    // One webhook message each, written by node A and read by either node's shard.
    const channels = Array.from({ length: 8 }, (_, i) => `ob-known-${i}`);
    for (const channel of channels) await client.subscribe(channel);
    const delivered = (): string[] => attempts().filter((a) => a.ok).map((a) => eventLabel(a.event));
    await until(() => channels.every((c) => delivered().includes(`channel_occupied:${c}`)), 'every occupied delivered through node A', 30_000);
  }, 60_000);
});
