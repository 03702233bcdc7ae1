/**
 * The seeder's write path: stores new devices with their interests exactly as Herald's
 * `LmdbDevices.register` followed by `LmdbDevices.replaceInterests` would (same records, same
 * index keys, through device-record.ts and keys.ts), but as plain puts in the caller's
 * transaction. The store's methods each run a child transaction that first reads the device
 * (record, then its interests) and writes the record twice; for a million new devices those
 * reads, the nested commits and the second write were most of the seeding time.
 *
 * Only for devices that do not exist yet, written into a shard no Herald is running on.
 * test/bench/push/seed-bulk.test.ts compares every key and value with the store's own writes.
 */
import type { RootDatabase } from 'lmdb';
import type { Platform } from '../../src/push/platform.js';
import { openDeviceDatabases, type DeviceDatabases } from '../../src/push/shard/devices/device-databases.js';
import { encodeDeviceRecord, type DeviceRecord } from '../../src/push/shard/devices/device-record.js';
import { MAX_INTERESTS_PER_DEVICE } from '../../src/push/interest-name.js';
import { encodeKey } from '../../src/push/keys.js';

/** A device to store: what the device API's register and set-interests requests carry. */
export interface NewDevice {
  id: string;
  platform: Platform;
  token: string;
  bundleIdentifier?: string | undefined;
  metadata?: Record<string, string> | undefined;
  interests: readonly string[];
}

const EMPTY = Buffer.alloc(0);

/** Writes new devices of one instance into a shard's device databases. */
export class BulkDeviceWriter {
  private readonly root: RootDatabase;
  private readonly db: DeviceDatabases;

  /** Opens the device databases; must not run inside a transaction. */
  constructor(root: RootDatabase) {
    this.root = root;
    this.db = openDeviceDatabases(root);
  }

  /**
   * Stores `devices` (none may exist yet) in one synchronous transaction, one synced commit.
   * `now` gives each device's creation time, as Date.now() does in register().
   */
  writeNew(instanceId: string, devices: readonly NewDevice[], now: () => number = Date.now): void {
    this.root.transactionSync(() => {
      for (const device of devices) this.put(instanceId, device, now());
    });
  }

  private put(instanceId: string, device: NewDevice, createdAt: number): void {
    const interests = [...new Set(device.interests)].sort();
    if (interests.length > MAX_INTERESTS_PER_DEVICE) throw new RangeError(`device ${device.id} has ${interests.length} interests`);
    const key = encodeKey([instanceId, device.id]);
    if (this.db.devices.doesExist(key)) throw new Error(`device ${device.id} exists already: the bulk path writes new devices only`);
    // register() then replaceInterests(): the record with the interests' count, its optional fields omitted when absent.
    const record: DeviceRecord = { platform: device.platform, token: device.token, createdAt, interestCount: interests.length };
    if (device.bundleIdentifier !== undefined) record.bundleIdentifier = device.bundleIdentifier;
    if (device.metadata !== undefined) record.metadata = { ...device.metadata };
    this.db.devices.putSync(key, encodeDeviceRecord(record));
    for (const name of interests) {
      this.db.interestIndex.putSync(encodeKey([instanceId, name, device.id]), EMPTY);
      this.db.deviceInterests.putSync(encodeKey([instanceId, device.id, name]), EMPTY);
    }
  }
}
