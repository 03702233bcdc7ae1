/**
 * Where HTTP fallback sessions live when several front-end threads serve: a session stays on
 * the thread that opened it, and a request the kernel hands to another thread is relayed to it
 * (channels/http-fallback/directory.ts, the same relay a cluster's nodes use). The main thread
 * keeps the table (session key → thread) and carries the relay messages between threads.
 */
import type { FallbackRelay, SessionDirectory } from '../channels/http-fallback/directory.js';
import type { ControlLink } from './control.js';

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
    relaysStreams: true,
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
