/**
 * Main-thread side of deleting a push instance's records: every shard retires the namespace it
 * holds for the instance (push/store/namespaces.ts) before the deletion is answered, all of them
 * taking the same new one; the records are then purged by each shard in the background.
 */
import type { ShardRequester } from '../../shards/requester.js';
import type { NamespaceShardApi } from '../messages/namespaces.js';
import { newNamespace } from '../store/namespaces.js';

/** Resolves once every shard has durably retired the instance's records (rejects when one could not: nothing is answered as deleted). */
export async function retirePushInstance(shards: ShardRequester<NamespaceShardApi>, instanceId: string): Promise<void> {
  await shards.broadcast({ type: 'push.retire', instanceId, next: newNamespace(instanceId) });
}
