/**
 * Where a push instance's records live in a store, so that deleting an instance is immediate
 * for its id and its records can be removed afterwards, in the background.
 *
 * Every record a shard keeps for an instance (devices, interests, users, publishes, usage,
 * reports) is keyed by the instance's namespace, not by its id: the id itself until the
 * instance is first deleted, then `<instanceId>/<token>`, a new token each time (instance ids
 * are UUIDs, so a namespace never reads as another instance's id). Deleting an instance
 * records, durably and before the deletion is answered, that its namespace is retired and
 * which one the id uses from then on. A push instance created again with the same id so sees an
 * empty store at once, while the retired namespace is purged in batches (push/shard/purge.ts),
 * and a purge never reaches the new namespace. A retirement is durable, so a purge cut short by
 * a stop or a crash resumes on the next start and the old records never come back.
 *
 * Two implementations, as for the device store: the shard's LMDB environment
 * (lmdb-namespaces.ts), and the cluster's PostgreSQL (postgres/postgres-namespaces.ts).
 */
import { randomBytes } from 'node:crypto';

/** The separator between an instance id and its namespace's token. */
const TOKEN_SEPARATOR = '/';

/** A namespace the instance has never used: `<instanceId>/<time and random token>`. */
export function newNamespace(instanceId: string): string {
  return `${instanceId}${TOKEN_SEPARATOR}${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}

/** The instance id a namespace belongs to (what gateways, webhooks and metrics name). */
export function instanceOfNamespace(namespace: string): string {
  const at = namespace.indexOf(TOKEN_SEPARATOR);
  return at < 0 ? namespace : namespace.slice(0, at);
}

export interface PushNamespaces {
  /** Resolves once current() answers from the store (PostgreSQL: connected, read); rejects when it cannot. */
  ready(): Promise<void>;
  /** The namespace the instance's records are kept under now (its id until it was first deleted). Synchronous: from memory. */
  current(instanceId: string): string;
  /**
   * Retires the namespace this store holds as the instance's current one and makes `next` the
   * current one; resolves once that is durable. Idempotent: when another shard or node retired
   * it already, only what is held in memory is brought up to date (and the purge of the old
   * namespace asked for again, so records written to it meanwhile go too).
   */
  retire(instanceId: string, next: string): Promise<void>;
  /** Reads the instance's current namespace from the store again (another node may have retired it). */
  refresh(instanceId: string): Promise<void>;
  /** Retired namespaces whose records are still to be removed, oldest first. */
  pending(): Promise<string[]>;
  /**
   * Removes at most about `limit` records of a retired namespace in one transaction; resolves to
   * true once none is left, the purge then forgotten.
   */
  purgeStep(namespace: string, limit: number): Promise<boolean>;
  close(): Promise<void>;
}
