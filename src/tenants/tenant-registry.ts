/**
 * Apps and push instances at run time (main thread): the config file's `apps`/`push` (the
 * seed) merged with the tenant store's records, and the admin API's changes applied live, one
 * tenant at a time through the running tenants (running-tenants.ts): the id and key maps get one
 * entry set or removed (lookups stay one Map get), the shards get only the changed entry
 * (`core.tenants`), and only that app's sockets are visited (closed 4001 when deleted or its key
 * changed, 4003 when disabled, else they take the new limits and secret). No other tenant is
 * touched.
 *
 * The seed wins: a record whose id (or key) a config-file entry has is not served, and the
 * admin API refuses to create one (409) or to change or delete a config-file entry (409).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { appSchema, pushInstanceSchema, type AppConfig, type HeraldConfig, type PushInstanceConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';
import type { SecretGrace } from '../config/secret-grace.js';
import { log } from '../log.js';
import type { TenantChange } from '../shards/context.js';
import type { RunningTenants } from './running-tenants.js';
import type { AppRecord, PushRecord, TenantKind, TenantRecord } from './tenant-record.js';
import type { SharedTenantStore, TenantStore } from './tenant-store.js';
import { TenantSync, type TenantHolder } from './tenant-sync.js';
import { checkPushKeyMaterial, refuseFilePaths, withoutKeyFiles } from './tenant-input.js';

/** Longest grace period of a rotated secret (seconds): 7 days. */
export const MAX_GRACE_SECONDS = 7 * 24 * 3600;

/** What a change reaches beyond the running tenants. */
export interface TenantEffects {
  /**
   * An app deleted through this node, once removed here: drops what it keeps in state shared by
   * the nodes (a cluster's cached events in Redis; nothing on one node, whose shards drop the
   * app's state when they take the removal). Never rejects.
   */
  appDeleted(appId: string): Promise<void>;
}

export interface TenantRegistryDeps {
  store: TenantStore;
  /** The same store when the nodes of a cluster share it (changes announced and caught up); null on one node. */
  shared: SharedTenantStore | null;
  /** The running apps and push instances: a change is applied there. */
  running: RunningTenants;
  /** The running config (apps and push included). */
  config: () => Readonly<HeraldConfig>;
  effects: TenantEffects;
  /**
   * Whether push instances may be managed here: on one node, and in a cluster whose devices are
   * in a shared PostgreSQL (`cluster.postgresUrl`); a cluster without it refuses (409).
   */
  pushAllowed: boolean;
  /**
   * Retires a deleted push instance's records on every shard (durably, before the deletion is
   * answered): a new instance with the same id sees none of them, and they are purged.
   */
  retirePush: (instanceId: string) => Promise<void>;
}

/** Where an entry comes from, as the admin API shows it. */
export type TenantSource = 'config' | 'api';

export class TenantRegistry implements TenantHolder {
  /** Stored records by `<kind>\0<id>` (those the seed shadows included); changed only through keep() and drop(). */
  private readonly records = new Map<string, TenantRecord>();
  /** The app id of each stored app record by its key (a key check is one lookup, whatever the count). */
  private readonly recordAppIdsByKey = new Map<string, string>();
  private seedAppIds = new Set<string>();
  private seedAppKeys = new Set<string>();
  private seedPushIds = new Set<string>();

  /** In a cluster: catches up with the changes of other nodes whose notice was lost. */
  private readonly sync: TenantSync | null;

  constructor(private readonly deps: TenantRegistryDeps) {
    this.sync = deps.shared ? new TenantSync(deps.shared, this) : null;
  }

  /**
   * Reads the store, a page at a time, and answers `fileConfig` with the stored tenants the seed
   * does not shadow added (start-up; the maps are built from it by the caller).
   */
  async load(fileConfig: Readonly<HeraldConfig>): Promise<Readonly<HeraldConfig>> {
    this.seed(fileConfig);
    await this.sync?.begin();
    for await (const page of this.deps.store.pages()) {
      for (const record of page) this.keep(record);
    }
    return this.merge(fileConfig);
  }

  /** In a cluster, from now on: other nodes' changes are applied on their notice, and those whose notice was lost on the next resubscription or version check. */
  follow(): void {
    this.sync?.start();
  }

  /** Another node announced a change: applies every change made since the last one applied. */
  changedElsewhere(): void {
    void this.sync?.catchUp();
  }

  close(): void {
    this.sync?.stop();
  }

  /** The apps and push instances to run with, given a (re)loaded file: the seed plus the records it does not shadow. */
  merge(fileConfig: Readonly<HeraldConfig>): Readonly<HeraldConfig> {
    this.seed(fileConfig);
    const apps = [...fileConfig.apps];
    const push = [...fileConfig.push];
    for (const record of this.records.values()) {
      if (this.shadowed(record)) continue;
      if (record.kind === 'app') apps.push(running(record));
      else push.push(running(record));
    }
    return Object.freeze({ ...fileConfig, apps, push });
  }

  private seed(fileConfig: Readonly<HeraldConfig>): void {
    this.seedAppIds = new Set(fileConfig.apps.map((a) => a.id));
    this.seedAppKeys = new Set(fileConfig.apps.map((a) => a.key));
    this.seedPushIds = new Set(fileConfig.push.map((p) => p.instanceId));
  }

  private shadowed(record: TenantRecord): boolean {
    if (record.kind === 'push') return this.seedPushIds.has(record.config.instanceId);
    return this.seedAppIds.has(record.config.id) || this.seedAppKeys.has(record.config.key);
  }

  source(kind: TenantKind, id: string): TenantSource {
    return (kind === 'app' ? this.seedAppIds : this.seedPushIds).has(id) ? 'config' : 'api';
  }

  // --- admin API operations ----------------------------------------------------------------

  /** Creates an app from the `apps[]` fields; `secret` generated when absent. Answers the app as stored. */
  async createApp(body: Record<string, unknown>): Promise<AppConfig> {
    refuseFilePaths(body, 'apps[]');
    const config = parseTenant(appSchema, { ...body, secret: body.secret ?? newSecret() }, 'apps[]') as AppConfig;
    if (this.deps.running.appsById.has(config.id) || this.records.has(recordKey('app', config.id))) {
      throw new HeraldError('ADMIN_CONFLICT', `An app with id ${config.id} exists`);
    }
    this.checkKeyFree(config.key, undefined);
    await this.commit({ kind: 'app', config, updatedAtMs: Date.now() });
    return config;
  }

  /**
   * Creates a push instance from the `push[]` fields, credentials as key material only;
   * `instanceId` and `secretKey` generated when absent.
   */
  async createPush(body: Record<string, unknown>): Promise<PushInstanceConfig> {
    this.checkPushAllowed();
    refuseFilePaths(body, 'push[]');
    const config = parseTenant(pushInstanceSchema, { ...body, instanceId: body.instanceId ?? randomUUID(), secretKey: body.secretKey ?? newSecret() }, 'push[]') as PushInstanceConfig;
    checkPushKeyMaterial(config, body);
    if (this.deps.running.pushInstances.has(config.instanceId) || this.records.has(recordKey('push', config.instanceId))) {
      throw new HeraldError('ADMIN_CONFLICT', `A push instance with id ${config.instanceId} exists`);
    }
    await this.commit({ kind: 'push', config, updatedAtMs: Date.now() });
    return config;
  }

  /** Changes the given fields of an API-created app (the id cannot change). */
  async updateApp(appId: string, patch: Record<string, unknown>): Promise<AppConfig> {
    const record = this.editable('app', appId) as AppRecord;
    if (patch.id !== undefined && patch.id !== appId) throw new HeraldError('ADMIN_INVALID_TENANT', 'apps[].id cannot change; create a new app instead');
    refuseFilePaths(patch, 'apps[]');
    const config = parseTenant(appSchema, { ...record.config, ...patch }, 'apps[]') as AppConfig;
    if (config.key !== record.config.key) this.checkKeyFree(config.key, appId);
    await this.commit({ ...record, config, updatedAtMs: Date.now() });
    return config;
  }

  async updatePush(instanceId: string, patch: Record<string, unknown>): Promise<PushInstanceConfig> {
    const record = this.editable('push', instanceId) as PushRecord;
    if (patch.instanceId !== undefined && patch.instanceId !== instanceId) throw new HeraldError('ADMIN_INVALID_TENANT', 'push[].instanceId cannot change');
    refuseFilePaths(patch, 'push[]');
    const config = parseTenant(pushInstanceSchema, { ...withoutKeyFiles(record.config), ...patch }, 'push[]') as PushInstanceConfig;
    checkPushKeyMaterial(config, patch);
    await this.commit({ ...record, config, updatedAtMs: Date.now() });
    return config;
  }

  /**
   * Deletes an API-created app or push instance. An app's sockets are closed with 4001, its
   * members removed and channels vacated with their webhooks (to the receivers it had), and
   * nothing of it is left for an app created later with the same id. A push instance's records
   * (devices, interests, users, publishes, reports) are retired first, so the id serves none of
   * them from the answer on, whatever is created with it later.
   */
  async remove(kind: TenantKind, id: string): Promise<void> {
    this.editable(kind, id);
    if (kind === 'push') await this.deps.retirePush(id);
    await this.deps.store.delete(kind, id);
    this.drop(kind, id);
    await this.applyRemoval(kind, id);
    if (kind === 'app') await this.deps.effects.appDeleted(id);
    await this.notify(kind, id);
  }

  /**
   * A new secret (secret key) for an API-created tenant; with `graceSeconds` > 0 the old one
   * is still accepted for that long, so callers can roll over without an outage.
   */
  async rotateSecret(kind: TenantKind, id: string, graceSeconds: number): Promise<string> {
    const record = this.editable(kind, id);
    const secret = newSecret();
    const previous = record.kind === 'app' ? record.config.secret : record.config.secretKey;
    const next: TenantRecord =
      record.kind === 'app' ? { ...record, config: { ...record.config, secret } } : { ...record, config: { ...record.config, secretKey: secret } };
    delete next.previousSecret;
    delete next.previousUntilMs;
    if (graceSeconds > 0) {
      next.previousSecret = previous;
      next.previousUntilMs = Date.now() + graceSeconds * 1000;
    }
    next.updatedAtMs = Date.now();
    await this.commit(next);
    return secret;
  }

  /** The stored record of an API-created tenant, or 404 / 409 (config-file entry). */
  private editable(kind: TenantKind, id: string): TenantRecord {
    if (this.source(kind, id) === 'config') {
      throw new HeraldError('ADMIN_CONFLICT', `${kind === 'app' ? 'App' : 'Push instance'} ${id} is defined in the config file: change it there (and reload)`);
    }
    const record = this.records.get(recordKey(kind, id));
    if (!record) throw new HeraldError('ADMIN_NOT_FOUND', `No ${kind === 'app' ? 'app' : 'push instance'} with id ${id.slice(0, 200)}`);
    if (kind === 'push') this.checkPushAllowed();
    return record;
  }

  private checkKeyFree(key: string, ownId: string | undefined): void {
    const holder = this.deps.running.appsByKey.get(key);
    if ((holder && holder.id !== ownId) || this.seedAppKeys.has(key)) throw new HeraldError('ADMIN_CONFLICT', `Another app has the key ${key}`);
    const recordHolder = this.recordAppIdsByKey.get(key);
    if (recordHolder !== undefined && recordHolder !== ownId) throw new HeraldError('ADMIN_CONFLICT', `Another app has the key ${key}`);
  }

  /** Keeps a stored record (replacing the one of its id). */
  private keep(record: TenantRecord): void {
    const key = recordKey(record.kind, idOf(record));
    const previous = this.records.get(key);
    if (previous?.kind === 'app' && this.recordAppIdsByKey.get(previous.config.key) === previous.config.id) this.recordAppIdsByKey.delete(previous.config.key);
    this.records.set(key, record);
    if (record.kind === 'app') this.recordAppIdsByKey.set(record.config.key, record.config.id);
  }

  /** Forgets a stored record. */
  private drop(kind: TenantKind, id: string): void {
    const key = recordKey(kind, id);
    const previous = this.records.get(key);
    if (previous?.kind === 'app' && this.recordAppIdsByKey.get(previous.config.key) === previous.config.id) this.recordAppIdsByKey.delete(previous.config.key);
    this.records.delete(key);
  }

  private checkPushAllowed(): void {
    if (!this.deps.pushAllowed) {
      throw new HeraldError('ADMIN_CONFLICT', 'Push instances in a cluster need the shared push store: set cluster.postgresUrl (or HERALD_POSTGRES_URL) on every node');
    }
  }

  /** Stores the record, applies it here, then tells the other nodes. */
  private async commit(record: TenantRecord): Promise<void> {
    await this.deps.store.put(record);
    this.keep(record);
    await this.applyRecord(record);
    await this.notify(record.kind, idOf(record));
  }

  /** A notice not sent is caught up by the other nodes' version check (tenant-sync.ts). */
  private async notify(kind: TenantKind, id: string): Promise<void> {
    await this.deps.shared?.notify(kind, id).catch((err: unknown) => log.warn('tenants: change notice not sent', { error: String(err) }));
  }

  // --- applying a change -------------------------------------------------------------------

  /**
   * Another node changed these tenants: reads each from the shared store and applies those that
   * differ from what is kept (a change already applied is not applied again).
   */
  async refresh(tenants: readonly { kind: TenantKind; id: string }[]): Promise<void> {
    const stored = await Promise.all(tenants.map(({ kind, id }) => this.deps.store.get(kind, id)));
    tenants.forEach(({ kind, id }, i) => this.take(kind, id, stored[i]));
  }

  /**
   * Makes the kept records those of the store, every one of them (the store lost its change
   * log, a Redis restarted empty): applies those that differ, removes those no longer stored.
   */
  async resync(): Promise<void> {
    const stored = new Set<string>();
    for await (const page of this.deps.store.pages()) {
      for (const record of page) {
        stored.add(recordKey(record.kind, idOf(record)));
        this.take(record.kind, idOf(record), record);
      }
    }
    for (const [key, record] of [...this.records]) {
      if (!stored.has(key)) this.take(record.kind, idOf(record), undefined);
    }
  }

  /** Keeps and applies `record` (undefined: removed) unless it is what is kept already. */
  private take(kind: TenantKind, id: string, record: TenantRecord | undefined): void {
    const key = recordKey(kind, id);
    const kept = this.records.get(key);
    if (record) {
      if (kept && JSON.stringify(kept) === JSON.stringify(record)) return;
      this.keep(record);
      void this.applyRecord(record);
    } else if (kept) {
      this.drop(kind, id);
      void this.applyRemoval(kind, id);
    }
  }

  private applyRecord(record: TenantRecord): Promise<void> {
    if (this.shadowed(record)) return Promise.resolve();
    return this.apply(record.kind === 'app' ? { apps: [running(record)] } : { push: [running(record)] });
  }

  private applyRemoval(kind: TenantKind, id: string): Promise<void> {
    if (this.source(kind, id) === 'config') return Promise.resolve();
    if (kind === 'app') {
      if (this.deps.running.appsById.has(id)) return this.apply({ removedApps: [id] });
    } else if (this.deps.running.pushInstances.has(id)) {
      return this.apply({ removedPush: [id] });
    }
    return Promise.resolve();
  }

  /**
   * Applies the change here. With followers (front-end threads, which serve the APIs) it
   * settles once they have it, so that an admin API answer is followed by requests that see the
   * change; otherwise at once (the shards take changes in the order they are sent).
   */
  private apply(change: TenantChange): Promise<void> {
    const taken = this.deps.running.apply(change).taken.then(
      () => undefined,
      (err: unknown) => {
        // A shard that missed it takes the running config when its worker restarts.
        log.error('tenants: a shard did not take the change', { error: String(err) });
      },
    );
    return this.deps.running.followed ? taken : Promise.resolve();
  }
}

function recordKey(kind: TenantKind, id: string): string {
  return `${kind}\0${id}`;
}

function idOf(record: TenantRecord): string {
  return record.kind === 'app' ? record.config.id : record.config.instanceId;
}

/** A new secret: 32 hex characters (128 random bits). */
function newSecret(): string {
  return randomBytes(16).toString('hex');
}

/** The running entry of a record: its config, plus the previous secret while its grace lasts. */
function running(record: AppRecord): AppConfig;
function running(record: PushRecord): PushInstanceConfig;
function running(record: TenantRecord): AppConfig | PushInstanceConfig {
  if (record.previousSecret === undefined || (record.previousUntilMs ?? 0) <= Date.now()) return record.config;
  const grace: SecretGrace = { previousSecret: record.previousSecret, previousUntilMs: record.previousUntilMs ?? 0 };
  return Object.assign({}, record.config, grace);
}

/**
 * Parses with the config schema; a failure is 422 naming the field as the config file would.
 * The schema's messages say what was expected, never the value received.
 */
function parseTenant(schema: typeof appSchema | typeof pushInstanceSchema, value: unknown, where: string): AppConfig | PushInstanceConfig {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const path = issue.path.length ? `${where}.${issue.path.join('.')}` : where;
    throw new HeraldError('ADMIN_INVALID_TENANT', `invalid ${path}: ${issue.message}`);
  }
  return result.data;
}
