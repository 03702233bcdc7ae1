import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import { ReportStore } from '../../../../../src/push/shard/reports/report-store.js';
import type { DeliveryReport } from '../../../../../src/push/messages/reports.js';

const A = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const B = '0f5e4d3c-2b1a-4987-8654-3210fedcba98';

const dirs: string[] = [];
const roots = new Set<RootDatabase>();

afterEach(async () => {
  for (const root of roots) await root.close();
  roots.clear();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function open(path?: string): { path: string; root: RootDatabase; store: ReportStore } {
  if (!path) {
    const dir = mkdtempSync(join(tmpdir(), 'herald-report-store-'));
    dirs.push(dir);
    path = join(dir, 'shard-0');
  }
  const root = openShardDatabase(path);
  roots.add(root);
  return { path, root, store: new ReportStore(root) };
}

function report(overrides: Partial<DeliveryReport> = {}): DeliveryReport {
  return { instanceId: A, publishId: 'pubid-1', deviceId: 'fcm-1', kind: 'delivery', timestampSecs: 1_700_000_000, ...overrides };
}

describe('ReportStore', () => {
  it('counts each (publish, device, kind) once', async () => {
    const { store } = open();
    expect(await store.record(report())).toBe('recorded');
    expect(await store.record(report())).toBe('duplicate');
    expect(await store.record(report({ timestampSecs: 1_700_000_500 }))).toBe('duplicate');
    expect(await store.record(report({ kind: 'open' }))).toBe('recorded');
    expect(await store.record(report({ kind: 'open' }))).toBe('duplicate');
    expect(await store.record(report({ deviceId: 'fcm-2' }))).toBe('recorded');
    expect(store.countsFor(A, 'pubid-1')).toEqual({ delivered: 2, opened: 1 });
    expect(store.has(A, 'pubid-1', 'open', 'fcm-1')).toBe(true);
    expect(store.has(A, 'pubid-1', 'open', 'fcm-2')).toBe(false);
  });

  it('keeps publishes and instances apart', async () => {
    const { store } = open();
    await store.record(report());
    await store.record(report({ publishId: 'pubid-2' }));
    await store.record(report({ instanceId: B }));
    await store.record(report({ publishId: 'pubid-1x' }));
    expect(store.countsFor(A, 'pubid-1')).toEqual({ delivered: 1, opened: 0 });
    expect(store.countsFor(B, 'pubid-1')).toEqual({ delivered: 1, opened: 0 });
    expect(store.countsFor(B, 'pubid-2')).toEqual({ delivered: 0, opened: 0 });
    expect(store.countsFor(A, 'no-such-publish')).toEqual({ delivered: 0, opened: 0 });
  });

  it('counts concurrent duplicates once', async () => {
    const { store } = open();
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => store.record(report())));
    expect(outcomes.filter((o) => o === 'recorded')).toHaveLength(1);
    expect(store.countsFor(A, 'pubid-1').delivered).toBe(1);
  });

  it('keeps what it recorded across a reopen', async () => {
    const first = open();
    await first.store.record(report());
    await first.store.record(report({ kind: 'open' }));
    roots.delete(first.root);
    await first.root.close();
    const again = open(first.path);
    expect(again.store.countsFor(A, 'pubid-1')).toEqual({ delivered: 1, opened: 1 });
    expect(await again.store.record(report())).toBe('duplicate');
  });

  it('lists its publishes and removes one publish entirely, in batches, leaving the others', async () => {
    const { store } = open();
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 6_000; i++) writes.push(store.record(report({ deviceId: `d${i}`, kind: i % 2 === 0 ? 'delivery' : 'open' })));
    writes.push(store.record(report({ publishId: 'pubid-2' })));
    writes.push(store.record(report({ instanceId: B })));
    await Promise.all(writes);
    // Key order: instance B's id sorts before A's.
    expect(Array.from(store.publishes())).toEqual([
      { instanceId: B, publishId: 'pubid-1' },
      { instanceId: A, publishId: 'pubid-1' },
      { instanceId: A, publishId: 'pubid-2' },
    ]);
    expect(store.countsFor(A, 'pubid-1')).toEqual({ delivered: 3_000, opened: 3_000 });

    expect(await store.removePublish(A, 'pubid-1')).toBe(true);
    expect(store.countsFor(A, 'pubid-1')).toEqual({ delivered: 0, opened: 0 });
    expect(store.has(A, 'pubid-1', 'delivery', 'd0')).toBe(false);
    expect(store.has(A, 'pubid-1', 'open', 'd5999')).toBe(false);
    expect(store.countsFor(A, 'pubid-2').delivered).toBe(1);
    expect(store.countsFor(B, 'pubid-1').delivered).toBe(1);
    expect(Array.from(store.publishes()).some((p) => p.instanceId === A && p.publishId === 'pubid-1')).toBe(false);
  });

  it('stops removing between batches when asked to, and finishes on a later call', async () => {
    const { store } = open();
    await Promise.all(Array.from({ length: 6_000 }, (_, i) => store.record(report({ deviceId: `d${i}` }))));
    expect(await store.removePublish(A, 'pubid-1', () => true)).toBe(false);
    expect(store.countsFor(A, 'pubid-1').delivered).toBe(6_000);
    expect(await store.removePublish(A, 'pubid-1')).toBe(true);
    expect(store.countsFor(A, 'pubid-1').delivered).toBe(0);
  });
});
