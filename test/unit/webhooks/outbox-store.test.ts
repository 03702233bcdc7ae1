/**
 * The outbox's LMDB store on a real environment in a temp dir: the dead-letter cap holds
 * whatever number of entries are dead-lettered in one event-loop turn.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database, RootDatabase } from 'lmdb';
import { openShardDatabase } from '../../../src/shards/storage.js';
import { OutboxStore, type DeadLetter, type OutboxEntry } from '../../../src/webhooks/outbox-store.js';
import { sleep, until } from '../../helpers/wait.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function openStore(cap: number): { store: OutboxStore; root: RootDatabase; dead: Database<DeadLetter, number> } {
  const dir = mkdtempSync(join(tmpdir(), 'herald-outbox-store-'));
  const root = openShardDatabase(join(dir, 'shard-0'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => root.close());
  const store = new OutboxStore(root, cap);
  return { store, root, dead: root.openDB<DeadLetter, number>({ name: 'webhooks/dead' }) };
}

function entry(store: OutboxStore): OutboxEntry {
  const seq = store.nextSeq();
  return { seq, id: `event-${seq}`, target: { kind: 'channel', appId: 'app', url: 'http://127.0.0.1:1/' }, createdAt: 0, notBefore: 0, attempts: 3 };
}

/** Dead-letters `n` new entries in one synchronous run (one event-loop turn). */
function deadLetterBurst(store: OutboxStore, n: number): void {
  for (let i = 0; i < n; i++) store.deadLetter(entry(store), 'HTTP 503', Date.now());
}

describe('OutboxStore dead letters', () => {
  it('keeps the newest `cap` records when bursts larger than the cap arrive in single turns', async () => {
    const { store, dead } = openStore(5);
    deadLetterBurst(store, 12);
    await until(() => dead.getCount() === 5, 'five dead letters kept', 3000);
    deadLetterBurst(store, 12);
    await until(() => [...dead.getKeys({})].join() === '20,21,22,23,24', 'the newest five kept', 3000);
    await store.flushed();
    // time: a trim that would overshoot the cap runs right after a commit; give it 50 ms to show.
    await sleep(50);
    // The count the store keeps matches what is stored, and the newest are the ones kept.
    expect(dead.getCount()).toBe(5);
    expect(store.deadLetterCount).toBe(5);
    expect([...dead.getKeys({})]).toEqual([20, 21, 22, 23, 24]);
    expect(store.deadLetters(10).map((d) => d.entry.seq)).toEqual([24, 23, 22, 21, 20]);
  });

  it('stays at the cap over many turns of single dead letters', async () => {
    const { store, dead } = openStore(3);
    for (let turn = 0; turn < 8; turn++) {
      deadLetterBurst(store, 2);
      await new Promise((r) => setImmediate(r));
    }
    // The count passing through 3 proves nothing (a trim's removals and newer records commit
    // in separate transactions): wait for the newest three, then check it stays there.
    await until(() => [...dead.getKeys({})].join() === '14,15,16', 'the newest three kept', 3000);
    await store.flushed();
    // time: a trim that would overshoot the cap runs right after a commit; give it 50 ms to show.
    await sleep(50);
    expect(store.deadLetterCount).toBe(3);
    expect([...dead.getKeys({})]).toEqual([14, 15, 16]);
  });
});
