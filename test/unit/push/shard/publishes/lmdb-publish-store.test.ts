/**
 * The stored job (`('job', publishId)`) has its own type, StoredPublishJob, converted from and to
 * the `publish.start` message at the store's boundary; data dirs of earlier versions, which stored
 * the message object itself, must keep working without a migration.
 */
import type { RootDatabase } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { encodeKey } from '../../../../../src/push/keys.js';
import { initialProgress } from '../../../../../src/push/store/publish-record-store.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { temporaryShardDatabases } from '../../../../helpers/shard-database.js';

const A = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const openRoot = temporaryShardDatabases('publish-store');

/** The `push/publish` database exactly as earlier versions opened it, to write records the old way. */
function rawPublishDb(root: RootDatabase) {
  return root.openDB<unknown, Uint8Array>('push/publish', { keyEncoding: 'binary', encoding: 'msgpack' });
}

/** Jobs in the shape earlier versions stored: the message object as the HTTP route built it. */
const oldJobs: Record<string, unknown>[] = [
  {
    publishId: 'pubid-1',
    instanceId: A,
    kind: 'interests',
    targets: ['donuts', 'b'],
    payloads: { apns: { aps: { alert: 'hi' } }, fcm: { notification: { title: 'hi' } } },
    acceptedAt: 1_763_000_000_123,
    webhookUrl: 'http://127.0.0.1:9/hook',
  },
  { publishId: 'pubid-2', instanceId: A, kind: 'users', targets: ['user-ü'], payloads: { web: { notification: {} } }, acceptedAt: 1 },
];

describe('LmdbPublishStore jobs', () => {
  it('reads a job record written by earlier versions (the message object stored as is)', async () => {
    const root = openRoot();
    const raw = rawPublishDb(root);
    await root.childTransaction(() => {
      for (const job of oldJobs) raw.putSync(encodeKey(['job', job.publishId as string]), job);
    });
    const store = new LmdbPublishStore(root);
    for (const job of oldJobs) expect(store.job(job.publishId as string)).toStrictEqual(job);
    expect(store.job('pubid-unknown')).toBeUndefined();
  });

  it('writes a job as the same bytes earlier versions wrote, and reads it back as the message', async () => {
    for (const old of oldJobs) {
      const before = openRoot();
      const raw = rawPublishDb(before);
      const key = encodeKey(['job', old.publishId as string]);
      await before.childTransaction(() => raw.putSync(key, old));

      const after = openRoot();
      const store = new LmdbPublishStore(after);
      // The message may carry the fields in another order: the stored order is the store's.
      const job = Object.fromEntries(Object.entries(old).reverse()) as unknown as PublishJob;
      expect(await store.create(job, initialProgress(job), false)).toBe(true);

      const oldBytes = raw.getBinary(key);
      expect(oldBytes?.length).toBeGreaterThan(0);
      expect(rawPublishDb(after).getBinary(key)).toEqual(oldBytes);
      expect(store.job(job.publishId)).toStrictEqual(old);
    }
  });
});
