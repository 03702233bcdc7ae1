/**
 * The push devices' databases as the reshard sees them (src/shards/shard-layout.ts): every
 * record is keyed by its device and moves, as bytes, to the device's shard under the new count.
 */
import { decodeKey } from '../../keys.js';
import { deviceShardFor } from '../../../shards/hash.js';
import { ReshardError, recordByRecord, type PlacedDatabase, type StoredRecord } from '../../../shards/shard-layout.js';
import { DEVICE_DATABASE_NAMES } from './device-databases.js';

/**
 * A database keyed by device: `devicePart` picks the device id out of the decoded key parts.
 * Also used by the reports (report-layout.ts), which are keyed by device too.
 */
export function deviceKeyed(name: string, devicePart: (parts: string[]) => string | undefined): PlacedDatabase {
  return { name, encoding: 'bytes', shardOf: (record, shards) => deviceShardFor(deviceIdOf(name, record, devicePart), shards) };
}

/** The device id in a record's key; a key without one refuses the reshard. */
export function deviceIdOf(name: string, record: StoredRecord, devicePart: (parts: string[]) => string | undefined): string {
  const parts = decodeKey(record.key as Uint8Array);
  const deviceId = devicePart(parts);
  if (deviceId === undefined) throw new ReshardError(`${name}: malformed key ${JSON.stringify(parts)}`);
  return deviceId;
}

export const deviceLayout = recordByRecord([
  deviceKeyed(DEVICE_DATABASE_NAMES.devices, (p) => p[1]),
  deviceKeyed(DEVICE_DATABASE_NAMES.interestIndex, (p) => p[2]),
  deviceKeyed(DEVICE_DATABASE_NAMES.deviceInterests, (p) => p[1]),
  deviceKeyed(DEVICE_DATABASE_NAMES.userIndex, (p) => p[2]),
]);
