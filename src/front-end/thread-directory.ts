/**
 * Where HTTP fallback sessions live when several front-end threads serve: a session stays on
 * the thread that opened it, and a request the kernel hands to another thread is relayed to it
 * (channels/http-fallback/directory.ts, the same relay a cluster's nodes use). The main thread
 * keeps the table (session key → thread) and carries the relay messages between threads.
 */
import type { FallbackRelay, SessionDirectory } from '../channels/http-fallback/directory.js';
import type { ControlLink } from './control.js';
import type { Redis } from 'ioredis';
import type { ControlMessage } from '../cluster/cluster.js';
import { nodeOfHolder, sessionRecords, threadHolder, threadOfHolder } from '../channels/http-fallback/cluster-directory.js';

/** The name of a thread in relay messages. */
export function threadNodeId(thread: number): string {
  return `thread-${thread}`;
}

/** A thread's side: every call goes to the main thread's table. */
export function threadSessionDirectory(thread: number, link: ControlLink): SessionDirectory {
  let handler: ((message: unknown, origin: string) => void) | undefined;
  link.on<{ from: number; message: FallbackRelay }>('fallbackRelay', ({ from, message }) => handler?.(message, threadNodeId(from)));
  return {
    nodeId: threadNodeId(thread),
    relaysStreams: () => true,
    owner: async (id) => {
      const owner = await link.ask<number | null>('fallbackOwner', { id });
      return owner === null ? null : threadNodeId(owner);
    },
    claim: (id, ttlMs) => link.ask<void>('fallbackClaim', { id, ttlMs }),
    release: (id) => link.tell('fallbackRelease', { id }),
    send: (nodeId, message) => link.tell('fallbackRelay', { to: Number(nodeId.slice('thread-'.length)), message }),
    onMessage: (h) => {
      handler = h;
    },
  };
}

/**
 * A thread's side on a cluster node: sessions are recorded in the main thread's table and in
 * the cluster's Redis under the thread's holder name (cluster-directory.ts, on the thread's own
 * connection); a message to a thread of this node goes through the main thread, one to another
 * node over the cluster's control channel (from there, its node's main thread hands it to the
 * holder).
 */
/** What the directory uses of the thread's share of its cluster node (channels/adapter/redis/thread-node.ts). */
export interface ThreadClusterNode {
  readonly nodeId: string;
  readonly commands: Redis;
  readonly keys: { readonly prefix: string };
  sendControl(target: string, message: ControlMessage, origin: string): Promise<number>;
}

export function threadClusterDirectory(thread: number, link: ControlLink, node: ThreadClusterNode): SessionDirectory {
  const name = threadHolder(node.nodeId, thread);
  let handler: ((message: unknown, origin: string) => void) | undefined;
  link.on<{ from: number; message: FallbackRelay }>('fallbackRelay', ({ from, message }) => handler?.(message, threadHolder(node.nodeId, from)));
  link.on<{ origin: string; message: FallbackRelay }>('fallbackRemote', ({ origin, message }) => handler?.(message, origin));
  const here = (holder: string): boolean => nodeOfHolder(holder) === node.nodeId;
  const records = sessionRecords(node.commands, node.keys.prefix, name);
  return {
    nodeId: name,
    relaysStreams: here,
    // The main thread's table first: this node's sessions are found while Redis is away.
    owner: async (id) => {
      const thread = await link.ask<number | null>('fallbackOwner', { id });
      return thread === null ? records.owner(id) : threadHolder(node.nodeId, thread);
    },
    claim: async (id, ttlMs) => {
      const local = link.ask<void>('fallbackClaim', { id, ttlMs });
      const recorded = records.claim(id, ttlMs);
      recorded.catch(() => {});
      await local;
      await recorded;
    },
    release: (id) => {
      link.tell('fallbackRelease', { id });
      records.release(id);
    },
    send: (holder, message) => {
      const to = threadOfHolder(holder, node.nodeId);
      if (to !== null) link.tell('fallbackRelay', { to, message });
      else node.sendControl(nodeOfHolder(holder), { type: 'fallback', data: message, to: holder }, name).catch(() => {});
    },
    onMessage: (h) => {
      handler = h;
    },
  };
}

/** The main thread's table of sessions: which thread holds each, until its record expires or is released. */
export class ThreadSessionTable {
  private readonly owners = new Map<string, { thread: number; expires: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  owner(id: string): number | null {
    const entry = this.owners.get(id);
    if (!entry) return null;
    if (entry.expires <= this.now()) {
      this.owners.delete(id);
      return null;
    }
    return entry.thread;
  }

  claim(thread: number, id: string, ttlMs: number): void {
    this.owners.set(id, { thread, expires: this.now() + ttlMs });
  }

  release(thread: number, id: string): void {
    if (this.owners.get(id)?.thread === thread) this.owners.delete(id);
  }

  /** A thread is gone: its sessions with it. */
  dropThread(thread: number): void {
    for (const [id, entry] of this.owners) if (entry.thread === thread) this.owners.delete(id);
  }
}
