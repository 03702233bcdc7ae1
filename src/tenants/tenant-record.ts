/**
 * What the admin API stores per tenant (type-only: the main thread, the shards and Redis share
 * it): the app or push instance exactly as the config schema parsed it, plus the secret a
 * rotation replaced while its grace period lasts.
 */
import type { AppConfig, PushInstanceConfig } from '../config/schema.js';

export type TenantKind = 'app' | 'push';

interface RecordBase {
  /** The previous secret (secret key) of a rotation with a grace period, accepted until `previousUntilMs`. */
  previousSecret?: string;
  /** Epoch ms the previous secret stops being accepted. */
  previousUntilMs?: number;
  /** Epoch ms of the last change (create, update, rotation). */
  updatedAtMs: number;
}

export interface AppRecord extends RecordBase {
  kind: 'app';
  config: AppConfig;
}

export interface PushRecord extends RecordBase {
  kind: 'push';
  config: PushInstanceConfig;
}

export type TenantRecord = AppRecord | PushRecord;

/** The id of a record: the app id or the push instance id. */
export function tenantId(record: TenantRecord): string {
  return record.kind === 'app' ? record.config.id : record.config.instanceId;
}
