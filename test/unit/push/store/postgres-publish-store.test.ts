/**
 * The cluster's publish records in PostgreSQL (a private server for this file): the publish
 * record store contract, and what only PostgreSQL does: partitions claimed under expiring
 * leases (never by two owners at once, taken over once expired, a checkpoint refused to the
 * owner that lost its lease), the closing webhooks queued once however many owners finish
 * the last partitions at once, delivery reports recorded once per (publish, device, kind), and
 * a new publish whose COMMIT comes after its deadline refused (a stalled server taking it up late).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { PublishJob } from '../../../../src/push/messages/publishes.js';
import { LeaseLostError } from '../../../../src/push/store/publish-record-store.js';
import { initialPartRecord, PostgresPublishStore } from '../../../../src/push/store/postgres/postgres-publish-store.js';
import { filePostgresServer } from '../../../helpers/file-postgres.js';
import { sleep } from '../../../helpers/wait.js';
import { publishRecordStoreContract } from './publish-record-store-contract.js';

const postgres = filePostgresServer();
const I = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
let databases = 0;
let seq = 0;

async function stores(count: number, leaseMs = 60_000): Promise<PostgresPublishStore[]> {
  const url = await postgres().createDatabase(`publish_${process.pid}_${++databases}`);
  const list = Array.from({ length: count }, (_, k) => new PostgresPublishStore({ url, owner: `owner-${k}`, leaseMs, shardIndex: 0 }));
  for (const store of list) await store.ready();
  return list;
}

function job(kind: PublishJob['kind'] = 'interests', targets: string[] = ['news']): PublishJob {
  return { publishId: `pubid-pg-${++seq}`, instanceId: I, kind, targets, payloads: { fcm: {} }, acceptedAt: seq };
}

publishRecordStoreContract('postgres (one partition per publish)', async () => {
  const [store] = await stores(1);
  return {
    store: store!,
    createPublish: async (j) => {
      await store!.create(j, 1);
      const claimed = await store!.claim();
      expect(claimed?.job.publishId).toBe(j.publishId);
      return initialPartRecord(j, 0);
    },
    close: () => store!.close(),
  };
});

describe('postgres publish store: partitions under leases', () => {
  it('lets each partition be claimed by one owner, and by another only once the lease has expired', async () => {
    const [a, b] = await stores(2, 1000);
    try {
      const j = job();
      expect(await a!.create(j, 3)).toBe(true);
      expect(await a!.create(j, 3)).toBe(false);
      const claimed = await Promise.all([a!.claim(), b!.claim(), a!.claim(), b!.claim()]);
      const got = claimed.filter((c) => c !== undefined).map((c) => c!.partition).sort();
      expect(got).toEqual([0, 1, 2]);
      expect(claimed.every((c) => c === undefined || !c.takenOver)).toBe(true);
      // b renews its partitions, a does not: once a's leases expire, b takes them over.
      const ofB = claimed.filter((c, k) => c !== undefined && k % 2 === 1).map((c) => ({ publishId: j.publishId, partition: c!.partition }));
      // b keeps renewing through the lease's life (1.6 s) while a lets its leases lapse.
      for (let i = 0; i < 8; i++) {
        expect(await b!.renew(ofB)).toEqual([]);
        // time: the lease expires only with time.
        await sleep(200);
      }
      const taken = await b!.claim();
      expect(taken?.takenOver).toBe(true);
      const fromA = claimed.filter((c, k) => c !== undefined && k % 2 === 0).map((c) => c!.partition);
      expect(fromA).toContain(taken!.partition);
      // a's checkpoint of the partition it lost is refused: the counts stay b's to write.
      await expect(a!.saveProgress({ ...initialPartRecord(j, taken!.partition), state: 'sending', recipients: 5 })).rejects.toBeInstanceOf(LeaseLostError);
      expect(await a!.renew([{ publishId: j.publishId, partition: taken!.partition }])).toHaveLength(1);
      await b!.saveProgress({ ...initialPartRecord(j, taken!.partition), state: 'sending', recipients: 1 });
    } finally {
      await a!.close();
      await b!.close();
    }
  });

  it('queues the closing webhooks once, by whichever owner completes the publish', async () => {
    const [a, b] = await stores(2);
    try {
      const j = job('users', ['u1', 'u2']);
      await a!.create(j, 2);
      const first = (await a!.claim())!;
      const second = (await b!.claim())!;
      await a!.saveProgress({ ...initialPartRecord(j, first.partition), state: 'finished', finishedAt: 10, updatedAt: 10 });
      const queued: string[] = [];
      expect(await a!.complete(j.publishId, () => queued.push('a'))).toBe(false);
      await b!.saveProgress({ ...initialPartRecord(j, second.partition), state: 'finished', finishedAt: 20, updatedAt: 20 });
      const outcomes = await Promise.all([a!.complete(j.publishId, () => queued.push('a')), b!.complete(j.publishId, () => queued.push('b'))]);
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(queued).toHaveLength(1);
      expect(await a!.unfinalized()).toEqual([]);
      // A finished partition is nobody's to claim.
      expect(await a!.claim()).toBeUndefined();
    } finally {
      await a!.close();
      await b!.close();
    }
  });

  it('records a delivery report once per (publish, device, kind), its callback inside', async () => {
    const [a] = await stores(1);
    try {
      const j = job();
      await a!.create(j, 1);
      const report = { instanceId: I, publishId: j.publishId, deviceId: 'd1', kind: 'delivery' as const, timestampSecs: 1 };
      let called = 0;
      expect(await a!.recordReport(report, () => called++)).toBe('recorded');
      expect(await a!.recordReport(report, () => called++)).toBe('duplicate');
      expect(await a!.recordReport({ ...report, kind: 'open' }, () => called++)).toBe('recorded');
      expect(called).toBe(2);
      expect(await a!.reportCounts(I, j.publishId)).toEqual({ delivered: 1, opened: 1 });
      // Reports go with their publish.
      await a!.cancel(j.publishId, 5);
      await a!.sweep(10);
      expect(await a!.reportCounts(I, j.publishId)).toEqual({ delivered: 0, opened: 0 });
    } finally {
      await a!.close();
    }
  });

  it('refuses the COMMIT of a new publish taken up after its transaction\'s deadline, and only then', async () => {
    const url = await postgres().createDatabase(`publish_${process.pid}_${++databases}`);
    const store = new PostgresPublishStore({ url, owner: 'owner-0', leaseMs: 60_000, shardIndex: 0 });
    await store.ready();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const insert = (id: string) =>
      client.query("INSERT INTO herald_push_publishes (publish_id, instance_id, kind, job, accepted_at, partitions) VALUES ($1, $2, 'interests', '\\x00', 1, 1)", [id, I]);
    try {
      // What a stalled server does with a COMMIT it takes up after the node gave up on it.
      await client.query('BEGIN');
      await client.query("SELECT set_config('herald.commit_deadline', (clock_timestamp() - interval '1 millisecond')::text, true)");
      await insert('pubid-late');
      await expect(client.query('COMMIT')).rejects.toMatchObject({ code: '57014' });
      expect(await store.partitionsOf('pubid-late')).toBe(0);
      // Within its deadline, or without one (the setting left empty in the session), it commits.
      await client.query('BEGIN');
      await client.query("SELECT set_config('herald.commit_deadline', (clock_timestamp() + interval '1 minute')::text, true)");
      await insert('pubid-in-time');
      await client.query('COMMIT');
      await insert('pubid-no-deadline');
      expect(await store.partitionsOf('pubid-in-time')).toBe(1);
      expect(await store.partitionsOf('pubid-no-deadline')).toBe(1);
      expect(await store.create(job(), 2)).toBe(true);
    } finally {
      await client.end();
      await store.close();
    }
  });
});
