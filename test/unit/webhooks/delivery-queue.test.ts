import { describe, expect, it } from 'vitest';
import { DeliveryQueue, readyAt } from '../../../src/webhooks/delivery-queue.js';
import type { OutboxEntry, WebhookTarget } from '../../../src/webhooks/outbox-store.js';

const target: WebhookTarget = { kind: 'channel', appId: 'app', url: 'http://127.0.0.1:9/hook' };

function entry(seq: number, notBefore = 0, attempts = 0): OutboxEntry {
  return { seq, id: `id-${seq}`, target, event: { name: 'channel_occupied' }, createdAt: 0, notBefore, attempts };
}

describe('DeliveryQueue', () => {
  it('takes due entries oldest first, up to the batch size, and not those in flight', () => {
    const q = new DeliveryQueue('k', target, 2, 50);
    for (const e of [entry(1), entry(2), entry(3, 500), entry(4)]) q.add(e);
    expect(q.take(100).map((e) => e.seq)).toEqual([1, 2]);
    expect(q.inFlightCount).toBe(2);
    expect(q.take(100).map((e) => e.seq)).toEqual([4]);
    expect(q.take(100)).toEqual([]);
    expect(q.hasDue(100)).toBe(false);
    expect(q.hasDue(500)).toBe(true);
  });

  it('settles a failed batch (back to pending) and removes delivered entries', () => {
    const q = new DeliveryQueue('k', target, 10, 50);
    for (const e of [entry(1), entry(2)]) q.add(e);
    const batch = q.take(0);
    q.remove(1);
    q.settle(batch);
    expect(q.size).toBe(1);
    expect(q.get(1)).toBeUndefined();
    expect(q.isInFlight(2)).toBe(false);
    expect(q.take(0).map((e) => e.seq)).toEqual([2]);
  });

  it('wakes a fresh entry one batch window after it is due, a retry at the end of its backoff', () => {
    const q = new DeliveryQueue('k', target, 10, 50);
    expect(q.nextWakeAt(0)).toBe(Number.POSITIVE_INFINITY);
    q.add(entry(1, 1_000));
    q.add(entry(2, 900, 2));
    expect(q.nextWakeAt(0)).toBe(900);
    expect(readyAt(entry(3, 1_000), 50)).toBe(1_050);
    q.remove(2);
    expect(q.nextWakeAt(0)).toBe(1_050);
    // Due entries and entries in flight do not set the timer.
    expect(q.nextWakeAt(1_000)).toBe(Number.POSITIVE_INFINITY);
  });
});
