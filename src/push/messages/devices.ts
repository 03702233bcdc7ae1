/**
 * Main ↔ shard messages of push devices (type-only). Every request goes to the shard that owns
 * the device (deviceShardFor), except the per-user ones (`device.countUserDevices`,
 * `device.deleteUser`), which are broadcast: a user's devices spread over every shard.
 * Write requests answer only after the store's synced commit.
 */
import type { Platform } from '../platform.js';

/** Addresses one device of one instance. */
export interface DeviceKey {
  instanceId: string;
  deviceId: string;
}

/** What D3/D4 show of a device. Optional fields are omitted when absent. */
export interface DeviceView {
  id: string;
  platform: Platform;
  userId?: string;
  metadata?: Record<string, string>;
}

/** Outcome of associating a user with a device (D10/D11). `limit`: the user is at the devices-per-user limit. */
export type SetUserOutcome = 'ok' | 'not-found' | 'already-associated' | 'limit';

export interface DeviceShardApi {
  /** Creates or refreshes a device (D1/D2); an existing device keeps its interests but loses its user association. */
  'device.register': {
    req: DeviceKey & { platform: Platform; token: string; bundleIdentifier?: string; metadata?: Record<string, string> };
    res: { id: string; initialInterestSet: string[]; created: boolean };
  };
  /** D3/D4. */
  'device.get': { req: DeviceKey; res: { device: DeviceView | null } };
  /** D5/D6; `deleted: false` when there was no such device. */
  'device.delete': { req: DeviceKey; res: { deleted: boolean } };
  /** D7/D8: replaces the metadata. */
  'device.setMetadata': { req: DeviceKey & { metadata: Record<string, string> }; res: { found: boolean } };
  /** D9: replaces the gateway token (the id stays). */
  'device.setToken': { req: DeviceKey & { token: string }; res: { found: boolean } };
  /**
   * D10/D11, on the device's shard: associates `userId` unless the user already has
   * `maxDevicesPerUser` devices, counting `devicesOnOtherShards` (from a broadcast of
   * `device.countUserDevices` just before) plus this shard's own count.
   */
  'device.setUser': {
    req: DeviceKey & { userId: string; devicesOnOtherShards: number; maxDevicesPerUser: number };
    res: { outcome: SetUserOutcome };
  };
  /** Devices of a user on this shard. */
  'device.countUserDevices': { req: { instanceId: string; userId: string }; res: { count: number } };
  /** D12: one page of interests, sorted by name. */
  'device.listInterests': {
    req: DeviceKey & { limit: number; cursor?: string };
    res: { outcome: 'ok'; interests: string[]; nextCursor?: string } | { outcome: 'not-found' | 'bad-cursor' };
  };
  /** D13: names already validated and de-duplicated by the main thread (at most 5000). */
  'device.replaceInterests': { req: DeviceKey & { interests: string[] }; res: { outcome: 'ok' | 'not-found' } };
  /** D14. `too-many`: the device already has the maximum of interests. */
  'device.addInterest': { req: DeviceKey & { interest: string }; res: { outcome: 'added' | 'unchanged' | 'not-found' | 'too-many' } };
  /** D15. */
  'device.removeInterest': { req: DeviceKey & { interest: string }; res: { outcome: 'removed' | 'unchanged' | 'not-found' } };
  /** Deletes every device of a user on this shard (user deletion API). */
  'device.deleteUser': { req: { instanceId: string; userId: string }; res: { deleted: number } };
  /** Devices of an instance on this shard by platform (admin API; reads every record of the instance). */
  'device.platformCounts': { req: { instanceId: string }; res: { counts: Record<Platform, number> } };
  /**
   * Test hook (no HTTP route; ROUTE_NOT_FOUND without test hooks, like core.crash): cross-checks this shard's device records and indexes and
   * lists every disagreement; empty means consistent. Reads everything: tests and offline tools.
   */
  'device.checkConsistency': { req: { instanceId?: string }; res: { problems: string[] } };
  /**
   * Start-up, every shard: resolves once the shard's device store is usable (PostgreSQL:
   * connected and its schema migrated), so an unreachable store fails start-up; answers the
   * installation secret device ids derive from (the cluster's, in PostgreSQL; `installSecret`,
   * this data dir's, when the store has none yet or is LMDB).
   */
  'device.storeReady': { req: { installSecret: string }; res: { store: 'lmdb' | 'postgres'; installSecret: string } };
}
