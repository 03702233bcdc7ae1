/**
 * The four named databases of one shard's push devices (layout: lmdb-devices.ts), opened once
 * and shared by the store (writes, point reads), its fan-out walk (device-scan.ts) and its
 * cross-check (device-consistency.ts).
 */
import type { Database, RootDatabase } from 'lmdb';
import { decodeDeviceRecord, type DeviceRecord } from './device-record.js';
import { lastKeyPart, prefixRange } from '../../keys.js';

/** The databases' names (also declared to the reshard, device-layout.ts). */
export const DEVICE_DATABASE_NAMES = {
  devices: 'push/devices',
  interestIndex: 'push/interests',
  deviceInterests: 'push/device-interests',
  userIndex: 'push/users',
} as const;

/** An index: keys only (values are empty). */
export type IndexDatabase = Database<Uint8Array, Uint8Array>;

export interface DeviceDatabases {
  readonly root: RootDatabase;
  /** Values are device-record.ts bytes (or msgpack, from before that format); read with readRecord(). */
  readonly devices: Database<Buffer, Uint8Array>;
  readonly interestIndex: IndexDatabase;
  readonly deviceInterests: IndexDatabase;
  readonly userIndex: IndexDatabase;
}

/** Opens (creating when missing) the device databases; must not run inside a transaction. */
export function openDeviceDatabases(root: RootDatabase): DeviceDatabases {
  const binary = { keyEncoding: 'binary', encoding: 'binary' } as const;
  return {
    root,
    devices: root.openDB<Buffer, Uint8Array>(DEVICE_DATABASE_NAMES.devices, binary),
    interestIndex: root.openDB<Uint8Array, Uint8Array>(DEVICE_DATABASE_NAMES.interestIndex, binary),
    deviceInterests: root.openDB<Uint8Array, Uint8Array>(DEVICE_DATABASE_NAMES.deviceInterests, binary),
    userIndex: root.openDB<Uint8Array, Uint8Array>(DEVICE_DATABASE_NAMES.userIndex, binary),
  };
}

/** The stored record under a device key, decoded at once (getBinaryFast's bytes are reused by the next read). */
export function readRecord(db: DeviceDatabases, key: Uint8Array): DeviceRecord | undefined {
  const bytes = db.devices.getBinaryFast(key);
  return bytes && decodeDeviceRecord(bytes);
}

/** The device's interests, sorted by name (at most MAX_INTERESTS_PER_DEVICE). */
export function interestsOf(db: DeviceDatabases, instanceId: string, deviceId: string): string[] {
  return Array.from(db.deviceInterests.getKeys(prefixRange([instanceId, deviceId])), lastKeyPart);
}
