/**
 * The main thread's directory of signed-in users when several front-end threads serve: which
 * threads hold connections of each user. A user is online for the process while any thread
 * holds one of its connections: watchers hear `online` when the first thread reports the user
 * and `offline` when the last one lets it go (or dies), once each, whatever threads the
 * connections are on.
 */
export interface UserDirectoryDeps {
  /** Tells the user's watchers, on every thread, that it came online or went offline. */
  presence(appId: string, userId: string, online: boolean): void;
}

export class UserDirectory {
  /** app id → user id → the threads holding one of its connections. */
  private readonly apps = new Map<string, Map<string, Set<number>>>();

  constructor(private readonly deps: UserDirectoryDeps) {}

  /** A thread says the user came online (its first connection there) or went offline (its last one there closed). */
  reported(thread: number, appId: string, userId: string, online: boolean): void {
    let users = this.apps.get(appId);
    if (online) {
      if (!users) this.apps.set(appId, (users = new Map()));
      let threads = users.get(userId);
      if (!threads) users.set(userId, (threads = new Set()));
      const first = threads.size === 0;
      threads.add(thread);
      if (first) this.deps.presence(appId, userId, true);
      return;
    }
    const threads = users?.get(userId);
    if (!threads || !threads.delete(thread) || threads.size > 0) return;
    users!.delete(userId);
    if (users!.size === 0) this.apps.delete(appId);
    this.deps.presence(appId, userId, false);
  }

  /** Those of `userIds` online now. */
  online(appId: string, userIds: readonly string[]): string[] {
    const users = this.apps.get(appId);
    return users ? userIds.filter((id) => users.has(id)) : [];
  }

  /** The threads holding connections of the user. */
  /** Every user signed in on some thread. */
  signedIn(): { appId: string; userId: string }[] {
    const out: { appId: string; userId: string }[] = [];
    for (const [appId, users] of this.apps) for (const userId of users.keys()) out.push({ appId, userId });
    return out;
  }

  threadsOf(appId: string, userId: string): number[] {
    return [...(this.apps.get(appId)?.get(userId) ?? [])];
  }

  /** A thread is gone: its users go offline where it was their last thread. */
  dropThread(thread: number): void {
    for (const [appId, users] of [...this.apps]) {
      for (const userId of [...users.keys()]) this.reported(thread, appId, userId, false);
    }
  }

  /** An app was removed: its users are forgotten (their sockets were closed). */
  forgetApp(appId: string): void {
    this.apps.delete(appId);
  }
}
