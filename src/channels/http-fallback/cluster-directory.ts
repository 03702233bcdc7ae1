/**
 * The session directory of a cluster (directory.ts), on the cluster's Redis: a key per session
 * naming its node (`<prefix>fb:<session>`, with a time to live the holder renews), and messages
 * to one node over the cluster's control channel. A lookup or record Redis cannot answer
 * rejects (the fallback answers "retry"). The node remembers what it claimed, and records it
 * again whenever the command connection is ready after a drop (Redis may be back empty).
 */
import type { Cluster } from '../../cluster/cluster.js';
import type { SessionDirectory } from './directory.js';

export function clusterSessionDirectory(cluster: Cluster): SessionDirectory {
  const redis = cluster.connections.commands;
  const nodeId = cluster.nodeId;
  const key = (id: string): string => `${cluster.keys.prefix}fb:${id}`;
  /** Sessions this node holds: id → the life (ms) of its record. */
  const held = new Map<string, number>();
  redis.on('ready', () => {
    for (const [id, ttlMs] of held) redis.set(key(id), nodeId, 'PX', ttlMs).catch(() => {});
  });
  return {
    nodeId,
    relaysStreams: false,
    owner: (id) => redis.get(key(id)),
    claim: (id, ttlMs) => {
      const renewal = held.has(id);
      held.set(id, ttlMs);
      return redis.set(key(id), nodeId, 'PX', ttlMs).then(
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
    send: (node, data) => {
      cluster.sendControl(node, { type: 'fallback', data }).catch(() => {});
    },
    onMessage: (handler) => {
      cluster.onControl((message, origin) => {
        if (origin !== nodeId && message.type === 'fallback') handler(message.data, origin);
      });
    },
  };
}
