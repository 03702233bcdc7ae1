/**
 * The namespaces of push instances in one shard's LMDB environment (store/namespaces.ts), in
 * the named database `push/namespaces` (keys are string tuples encoded by ../keys.ts, values
 * msgpack):
 *
 *   ('current', instanceId)  → namespace     the instance's namespace, once it differs from its id
 *   ('purge', namespace)     → retiredAtMs   a retired namespace whose records are still to go
 *
 * Both are written in one synced child transaction, so a retirement answered survives kill -9.
 * A purge removes the namespace's keys from the device, report and publish databases of this
 * shard, a bounded number per transaction.
 */
import type { Database, RootDatabase } from 'lmdb';
import { decodeKey, encodeKey, prefixRange } from '../keys.js';
import { DEVICE_DATABASE_NAMES } from '../shard/devices/device-databases.js';
import { REPORT_COUNTS_DATABASE, REPORTS_DATABASE } from '../shard/reports/report-store.js';
import type { LmdbPublishStore } from '../shard/publishes/lmdb-publish-store.js';
import type { PushNamespaces } from './namespaces.js';

/** The database's name (also declared to the reshard, push/shard/namespace-layout.ts). */
export const NAMESPACE_DATABASE = 'push/namespaces';

/** The databases whose every key starts with the namespace. */
const KEYED_BY_NAMESPACE = [...Object.values(DEVICE_DATABASE_NAMES), REPORTS_DATABASE, REPORT_COUNTS_DATABASE];

export class LmdbNamespaces implements PushNamespaces {
  private readonly db: Database<unknown, Uint8Array>;
  private readonly keyed: Database<unknown, Uint8Array>[];
  private readonly held = new Map<string, string>();

  constructor(
    private readonly root: RootDatabase,
    private readonly publishes: LmdbPublishStore,
  ) {
    this.db = root.openDB<unknown, Uint8Array>(NAMESPACE_DATABASE, { keyEncoding: 'binary', encoding: 'msgpack' });
    this.keyed = KEYED_BY_NAMESPACE.map((name) => root.openDB<unknown, Uint8Array>(name, { keyEncoding: 'binary', encoding: 'binary' }));
    for (const { key, value } of this.db.getRange(prefixRange(['current']))) this.held.set(decodeKey(key)[1]!, value as string);
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  current(instanceId: string): string {
    return this.held.get(instanceId) ?? instanceId;
  }

  async retire(instanceId: string, next: string): Promise<void> {
    const retired = this.current(instanceId);
    if (retired === next) return;
    await this.root.childTransaction(() => {
      this.db.putSync(encodeKey(['purge', retired]), Date.now());
      this.db.putSync(encodeKey(['current', instanceId]), next);
    });
    this.held.set(instanceId, next);
  }

  refresh(): Promise<void> {
    return Promise.resolve();
  }

  pending(): Promise<string[]> {
    const purges = Array.from(this.db.getRange(prefixRange(['purge'])), ({ key, value }) => ({ namespace: decodeKey(key)[1]!, at: value as number }));
    return Promise.resolve(purges.sort((a, b) => a.at - b.at).map((p) => p.namespace));
  }

  async purgeStep(namespace: string, limit: number): Promise<boolean> {
    let left = limit;
    const range = prefixRange([namespace]);
    const doomed: [Database<unknown, Uint8Array>, Uint8Array[]][] = [];
    for (const db of this.keyed) {
      if (left <= 0) break;
      const keys = Array.from(db.getKeys({ ...range, limit: left }));
      left -= keys.length;
      if (keys.length > 0) doomed.push([db, keys]);
    }
    if (doomed.length > 0) {
      await this.root.childTransaction(() => {
        for (const [db, keys] of doomed) for (const key of keys) db.removeSync(key);
      });
    }
    if (left <= 0) return false;
    if ((await this.publishes.removeInstance(namespace, left)) > 0) return false;
    await this.root.childTransaction(() => this.db.removeSync(encodeKey(['purge', namespace])));
    return true;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
