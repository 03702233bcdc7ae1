/**
 * The session directory of a cluster (directory.ts), on the cluster's Redis: a key per session
 * naming its holder (`<prefix>fb:<session>`, with a time to live the holder renews), and messages
 * to one node over the cluster's control channel. A lookup or record Redis cannot answer
 * rejects (the fallback answers "retry"). The holder remembers what it claimed, and records it
 * again whenever the command connection is ready after a drop (Redis may be back empty).
 *
 * A holder is a node (its id), or a front-end thread of a node with several
 * (`<node id>/t<thread>`, front-end/thread-directory.ts): a message to a thread goes to its
 * node, naming the thread in `to`, and the node's main thread hands it on.
 */
import type { Redis } from 'ioredis';
import type { Cluster } from '../../cluster/cluster.js';
import type { SessionDirectory } from './directory.js';

/** The name a front-end thread of a node with several holds sessions under (node ids have no `/`). */
export function threadHolder(nodeId: string, thread: number): string {
  return `${nodeId}/t${thread}`;
}

/** The node a holder is on. */
export function nodeOfHolder(holder: string): string {
  const slash = holder.indexOf('/');
  return slash < 0 ? holder : holder.slice(0, slash);
}

/** The thread a holder names on node `nodeId`; null for the node itself or another node's. */
export function threadOfHolder(holder: string, nodeId: string): number | null {
  if (!holder.startsWith(`${nodeId}/t`)) return null;
  const thread = Number(holder.slice(nodeId.length + 2));
  return Number.isInteger(thread) && thread >= 0 ? thread : null;
}

/** The directory's records in Redis, of the sessions `holder` holds. */
export function sessionRecords(redis: Redis, prefix: string, holder: string): Pick<SessionDirectory, 'owner' | 'claim' | 'release'> {
  const key = (id: string): string => `${prefix}fb:${id}`;
  /** Sessions held here: id → the life (ms) of its record. */
  const held = new Map<string, number>();
  redis.on('ready', () => {
    for (const [id, ttlMs] of held) redis.set(key(id), holder, 'PX', ttlMs).catch(() => {});
  });
  return {
    owner: (id) => redis.get(key(id)),
    claim: (id, ttlMs) => {
      const renewal = held.has(id);
      held.set(id, ttlMs);
      return redis.set(key(id), holder, 'PX', ttlMs).then(
        () => undefined,
        (err: unknown) => {
          // A new session not recorded is not opened; one held already is recorded again later.
          if (!renewal) held.delete(id);
          throw err;
        },
      );
    },
    release: (id) => {
      held.delete(id);
      redis.del(key(id)).catch(() => {});
    },
  };
}

export function clusterSessionDirectory(cluster: Cluster): SessionDirectory {
  const nodeId = cluster.nodeId;
  return {
    nodeId,
    relaysStreams: () => false,
    ...sessionRecords(cluster.connections.commands, cluster.keys.prefix, nodeId),
    send: (holder, data) => {
      cluster.sendControl(nodeOfHolder(holder), { type: 'fallback', data, to: holder }).catch(() => {});
    },
    onMessage: (handler) => {
      cluster.onControl((message, origin) => {
        if (origin !== nodeId && message.type === 'fallback') handler(message.data, origin);
      });
    },
  };
}
