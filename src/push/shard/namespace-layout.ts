/**
 * The namespaces of push instances as the reshard sees them (src/shards/shard-layout.ts): a
 * reshard waits until every deleted instance's records are purged, and every new shard then
 * takes the current namespaces (every shard retired the same ones, with the same successors).
 */
import { decodeKey } from '../keys.js';
import { ReshardError, type ShardLayout } from '../../shards/shard-layout.js';
import { NAMESPACE_DATABASE } from '../store/lmdb-namespaces.js';

export const namespaceLayout: ShardLayout = {
  databases: [{ name: NAMESPACE_DATABASE, encoding: 'binary-keys' }],
  check(old) {
    const seen = new Map<string, unknown>();
    for (let shard = 0; shard < old.count; shard++) {
      for (const { key, value } of old.records(shard, NAMESPACE_DATABASE)) {
        const [kind, id] = decodeKey(key as Uint8Array);
        if (kind === 'purge') throw new ReshardError('the records of a deleted push instance are still being purged: start the server, let the purge finish (herald_push_purges_pending 0), stop it, then reshard');
        const other = seen.get(id!);
        if (other !== undefined && other !== value) throw new ReshardError(`shards disagree on where push instance ${id} keeps its records: delete the instance again, then reshard`);
        seen.set(id!, value);
      }
    }
  },
  copy(old, out) {
    const current = new Map<string, { key: unknown; value: unknown }>();
    for (let shard = 0; shard < old.count; shard++) {
      for (const { key, value } of old.records(shard, NAMESPACE_DATABASE)) current.set(decodeKey(key as Uint8Array)[1]!, { key, value });
    }
    for (const { key, value } of current.values()) {
      for (let shard = 0; shard < out.count; shard++) out.put(shard, NAMESPACE_DATABASE, key as Uint8Array, value);
    }
  },
};
