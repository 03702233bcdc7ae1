/**
 * The running apps and push instances (main thread), and the one place they change: the id and
 * key maps (lookups stay one Map get; a key rotated away is swapped for the new one), the
 * running config (its lists views of the maps), the shards (`core.tenants` with the changed
 * entries only, in pages) and the changed apps' sockets. The start-up (stored tenants), a
 * reload (SIGHUP) and the tenant registry (the admin API's changes, and another node's) all
 * apply their change through `apply`.
 */
import type { AppConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';
import type { TenantChange } from '../shards/context.js';
import type { CoreShardApi, ShardRequestOf } from '../shards/messages.js';
import type { ShardRequester } from '../shards/requester.js';
import { configWithTenants } from '../shards/tenant-lists.js';
import { IdOrderedMap, type ReadonlyIdOrderedMap } from './id-ordered-map.js';
import { TENANT_PAGE_SIZE } from './tenant-store.js';

/** The sockets of the running apps (the WebSocket endpoint). */
export interface AppSockets {
  /** The app's sockets: closed (`next` undefined, or another key: 4001; disabled: 4003) or given `next`. Answers how many were closed. */
  applyApp(appId: string, next: AppConfig | undefined): number;
}

export interface RunningTenantsDeps {
  shards: ShardRequester<CoreShardApi>;
  /** The running config. */
  config: () => Readonly<HeraldConfig>;
  /** Adopts the running config after a change (this thread's, and a restarted shard's). */
  configChanged: (config: Readonly<HeraldConfig>) => void;
  /**
   * Hands the change on, once the shards have it (the front-end threads, when several serve), with
   * the whole running config when the change came with one (start-up, reload); `taken` waits for it.
   * Answers how many connections the followers closed (their sockets, as `closed` counts this thread's).
   */
  follow?: (change: TenantChange, config: Readonly<HeraldConfig> | undefined) => Promise<number>;
}

export interface ApplyOptions {
  /** The running config after the change (the start-up's, a reload's); by default the current one with the maps' lists. */
  config?: Readonly<HeraldConfig>;
  /** The shards have the change already (a reload sent them the whole config): it is not sent again. */
  shardsUpToDate?: boolean;
}

export interface Applied {
  /** Connections closed on this thread because their app was removed, disabled or given another key. */
  closed: number;
  /**
   * Settles once every shard (and follower) answered, with the connections the followers closed
   * (0 without followers); rejects with the first failure (a shard that missed the change takes
   * the running config when its worker restarts).
   */
  taken: Promise<number>;
}

export class RunningTenants {
  private readonly apps: IdOrderedMap<AppConfig>;
  private readonly keys: Map<string, AppConfig>;
  private readonly push: IdOrderedMap<PushInstanceConfig>;
  private sockets: AppSockets | undefined;

  constructor(
    initial: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>,
    private readonly deps: RunningTenantsDeps,
  ) {
    this.apps = new IdOrderedMap(initial.apps.map((a) => [a.id, a]));
    this.keys = new Map(initial.apps.map((a) => [a.key, a]));
    this.push = new IdOrderedMap(initial.push.map((p) => [p.instanceId, p]));
  }

  /** The running apps by id (in id order). */
  get appsById(): ReadonlyIdOrderedMap<AppConfig> {
    return this.apps;
  }

  /** The running apps by key. */
  get appsByKey(): ReadonlyMap<string, AppConfig> {
    return this.keys;
  }

  /** The running push instances by id (in id order). */
  get pushInstances(): ReadonlyIdOrderedMap<PushInstanceConfig> {
    return this.push;
  }

  /** Whether a change is handed on (`follow`): front-end threads serve the APIs. */
  get followed(): boolean {
    return this.deps.follow !== undefined;
  }

  /** From now on a changed app's sockets take the change (the WebSocket endpoint opens after the stored tenants are loaded). */
  attach(sockets: AppSockets): void {
    this.sockets = sockets;
  }

  /**
   * Applies a change of apps and push instances: the shards are sent it first (a request this
   * thread lets through for a new app afterwards reaches its shard after the change), then the
   * maps, the running config and the changed apps' sockets take it.
   */
  apply(change: TenantChange, options: ApplyOptions = {}): Applied {
    const sent = options.shardsUpToDate ? Promise.resolve() : this.send(change);
    for (const id of change.removedApps ?? []) {
      const previous = this.apps.get(id);
      if (!previous) continue;
      this.apps.delete(id);
      if (this.keys.get(previous.key) === previous) this.keys.delete(previous.key);
    }
    for (const app of change.apps ?? []) {
      const previous = this.apps.get(app.id);
      if (previous && this.keys.get(previous.key) === previous) this.keys.delete(previous.key);
      this.apps.set(app.id, app);
      this.keys.set(app.key, app);
    }
    for (const id of change.removedPush ?? []) this.push.delete(id);
    for (const instance of change.push ?? []) this.push.set(instance.instanceId, instance);
    const config = options.config ?? configWithTenants(this.deps.config(), { apps: this.apps, push: this.push });
    this.deps.configChanged(config);
    const follow = this.deps.follow;
    // The followers get the change even when a shard missed it (that shard takes the config when it restarts).
    const taken = follow ? sent.then(() => follow(change, options.config), (err: unknown) => follow(change, options.config).then(() => Promise.reject(err))) : sent.then(() => 0);
    let closed = 0;
    if (this.sockets) {
      for (const id of change.removedApps ?? []) closed += this.sockets.applyApp(id, undefined);
      for (const app of change.apps ?? []) closed += this.sockets.applyApp(app.id, app);
    }
    return { closed, taken };
  }

  /** Every shard gets the change as `core.tenants` pages. */
  private send(change: TenantChange): Promise<void> {
    const pages = tenantPages(change);
    const answers: Promise<unknown>[] = [];
    for (let shard = 0; shard < this.deps.shards.shardCount; shard++) {
      for (const page of pages) answers.push(this.deps.shards.request(shard, { type: 'core.tenants', ...page }));
    }
    return Promise.allSettled(answers).then((results) => {
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    });
  }
}

/**
 * A change of apps and push instances as `core.tenants` messages of at most TENANT_PAGE_SIZE
 * entries each: one message of 10,000 apps would grow the pack buffers of both threads by megabytes.
 */
function tenantPages(change: TenantChange): Omit<ShardRequestOf<CoreShardApi, 'core.tenants'>, 'type'>[] {
  const pages: Omit<ShardRequestOf<CoreShardApi, 'core.tenants'>, 'type'>[] = [];
  const add = <K extends keyof TenantChange>(field: K, entries: NonNullable<TenantChange[K]>) => {
    for (let i = 0; i < entries.length; i += TENANT_PAGE_SIZE) pages.push({ [field]: entries.slice(i, i + TENANT_PAGE_SIZE) });
  };
  add('removedApps', change.removedApps ?? []);
  add('apps', change.apps ?? []);
  add('removedPush', change.removedPush ?? []);
  add('push', change.push ?? []);
  return pages;
}
