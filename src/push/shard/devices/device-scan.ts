/**
 * The fan-out walk over one shard's device indexes: every device subscribed to any of a list
 * of interests (each once) or belonging to any of a list of users, resumable from a
 * ScanPosition, never holding a cursor or read transaction between yields.
 */
import type { Database, RangeIterable, RootDatabase } from 'lmdb';
import { decodeScanDevice, type RecordScanDevice } from './device-record.js';
import { normaliseScanList, partitionBounds, type ScanPartition, type ScanPosition, type ScanStep, type ScannedDevice } from '../../store/device-store.js';
import { DEVICE_DATABASE_NAMES, type DeviceDatabases } from './device-databases.js';
import { fnv1a32 } from '../../../shards/hash.js';
import { encodeKey, joinKeys, keyAfter, keyPartBetween, lastKeyPart, prefixRange, writeKeyPart } from '../../keys.js';

/**
 * Index keys read per cursor during a fan-out (the cursor is closed between batches), and the
 * most index entries a step scan passes over without yielding.
 */
export const SCAN_BATCH = 256;

function checkScanPosition(position: ScanPosition | undefined): void {
  if (position === undefined) return;
  if (!Number.isSafeInteger(position.listIndex) || position.listIndex < 0) {
    throw new RangeError(`scan position listIndex must be a non-negative integer, got ${position.listIndex}`);
  }
}

/** The device steps of a step scan, without its progress steps. */
export function* devicesOnly(steps: Iterable<ScanStep>): Generator<ScannedDevice, void, undefined> {
  for (const step of steps) {
    if (step.device !== null) yield step;
  }
}

/**
 * A key encoding for reading an index `(instanceId, name, deviceId)` as the ids of its devices:
 * lmdb-js hands readKey the stored bytes and the last part is decoded from them in place (no
 * Buffer per key). Bounds are written as they are (encoded index keys). Scans only.
 */
const DEVICE_ID_VIEW = {
  writeKey(key: Uint8Array, target: Uint8Array, start: number): number {
    target.set(key, start);
    return start + key.length;
  },
  readKey(source: Buffer, start: number, end: number): string {
    let lastStart = end;
    while (lastStart > start && source[lastStart - 1] !== 0x00) lastStart--;
    return keyPartBetween(source, lastStart, end);
  },
};

/**
 * Point reads of device records by device id, writing the record key `(instanceId, deviceId)`
 * straight into lmdb-js's key buffer (no key Buffer per read). Reads are synchronous, so the
 * instance part set by `bytesOf` is the one its own read writes.
 */
class RecordReader {
  private readonly records: Database<Buffer, string>;
  /** encodeKey([instanceId]) and a separator, of the read under way. */
  private instancePart: Buffer = Buffer.alloc(0);

  constructor(root: RootDatabase) {
    const encoder = {
      writeKey: (deviceId: string, target: Buffer, start: number): number => {
        target.set(this.instancePart, start);
        return writeKeyPart(deviceId, target, start + this.instancePart.length);
      },
      readKey: (): never => {
        throw new Error('RecordReader reads values only');
      },
    };
    const view = { keyEncoder: encoder, encoding: 'binary' } as const;
    this.records = root.openDB<Buffer, string>(DEVICE_DATABASE_NAMES.devices, view);
  }

  /** The record bytes of `deviceId` in the instance whose part is `instancePart` (instancePartOf), valid until the next read. */
  bytesOf(instancePart: Buffer, deviceId: string): Buffer | undefined {
    this.instancePart = instancePart;
    return this.records.getBinaryFast(deviceId);
  }
}

/** The leading bytes of every key of `instanceId`: its encoded part and the separator. */
function instancePartOf(instanceId: string): Buffer {
  return prefixRange([instanceId]).start;
}

/** An index read through DEVICE_ID_VIEW: its keys come out as device ids (bounds stay encoded keys). */
interface DeviceIdIndex {
  getKeys(options: { start: Uint8Array; end: Uint8Array; limit: number }): RangeIterable<string>;
}

/** The interests a multi-interest scan has already walked, by name and as encoded key parts. */
class EarlierInterests {
  readonly names: ReadonlySet<string>;
  readonly keys: readonly Buffer[];

  constructor(names: readonly string[]) {
    this.names = new Set(names);
    this.keys = names.map((name) => encodeKey([name]));
  }
}

/** The step scans of one shard's device databases (LmdbDevices.scanInterestSteps / scanUserSteps). */
export class DeviceScan {
  /** The two fan-out indexes read through DEVICE_ID_VIEW. */
  private readonly interestDeviceIds: DeviceIdIndex;
  private readonly userDeviceIds: DeviceIdIndex;
  private readonly records: RecordReader;

  /** Opens the device-id views of the indexes and the record reader; must not run inside a transaction. */
  constructor(private readonly db: DeviceDatabases) {
    const view = { keyEncoder: DEVICE_ID_VIEW, encoding: 'binary' } as const;
    this.interestDeviceIds = db.root.openDB<Uint8Array, Uint8Array>(DEVICE_DATABASE_NAMES.interestIndex, view) as unknown as DeviceIdIndex;
    this.userDeviceIds = db.root.openDB<Uint8Array, Uint8Array>(DEVICE_DATABASE_NAMES.userIndex, view) as unknown as DeviceIdIndex;
    this.records = new RecordReader(db.root);
  }

  interestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    return this.indexSteps(instanceId, this.interestDeviceIds, interests, resumeFrom, partition, (list, listIndex) => {
      const earlier = new EarlierInterests(list.slice(0, listIndex));
      return (device) => this.subscribedToAny(instanceId, device.id, device.interestCount, earlier);
    });
  }

  userSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    return this.indexSteps(instanceId, this.userDeviceIds, userIds, resumeFrom, partition, (list, listIndex) => {
      const userId = list[listIndex]!;
      return (device) => device.userId !== userId;
    });
  }

  /**
   * The devices of `deviceIds` this shard holds (one point read each), in normaliseScanList
   * order; ids held elsewhere or unknown are passed over like stale index entries.
   */
  *deviceSteps(instanceId: string, deviceIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    checkScanPosition(resumeFrom);
    const { low, high } = partitionBounds(partition);
    const list = normaliseScanList(deviceIds);
    // A position names the last id handled: resume with the next one.
    const first = resumeFrom === undefined ? 0 : resumeFrom.listIndex + (resumeFrom.afterDeviceId === null ? 0 : 1);
    let skipped = 0;
    for (let listIndex = first; listIndex < list.length; listIndex++) {
      const deviceId = list[listIndex]!;
      const hash = partition === undefined ? 0 : fnv1a32(deviceId);
      const bytes = hash >= low && hash < high ? this.db.devices.getBinaryFast(encodeKey([instanceId, deviceId])) : undefined;
      if (!bytes) {
        if (++skipped >= SCAN_BATCH) {
          yield { device: null, position: { listIndex, afterDeviceId: deviceId }, skipped };
          skipped = 0;
        }
        continue;
      }
      skipped = 0;
      yield { device: decodeScanDevice(bytes, deviceId, instanceId), position: { listIndex, afterDeviceId: deviceId } };
    }
  }

  /**
   * The step scan behind scanInterestSteps/scanUserSteps: walks `deviceIds` (an index read
   * through DEVICE_ID_VIEW) under each name of the normalised `names` list from `resumeFrom`,
   * yielding each device of `partition` whose record exists and is not skipped by `skipFor(list, listIndex)`
   * (built once per list entry), and a ScanProgress step after every SCAN_BATCH entries in a
   * row passed over.
   */
  private *indexSteps(
    instanceId: string,
    deviceIds: DeviceIdIndex,
    names: readonly string[],
    resumeFrom: ScanPosition | undefined,
    partition: ScanPartition | undefined,
    skipFor: (list: readonly string[], listIndex: number) => (device: RecordScanDevice) => boolean,
  ): Generator<ScanStep, void, undefined> {
    checkScanPosition(resumeFrom);
    const { low, high } = partitionBounds(partition);
    const list = normaliseScanList(names);
    const instancePart = instancePartOf(instanceId);
    let after = resumeFrom?.afterDeviceId ?? null;
    let skipped = 0;
    for (let listIndex = resumeFrom?.listIndex ?? 0; listIndex < list.length; listIndex++, after = null) {
      const skip = skipFor(list, listIndex);
      for (const batch of this.indexBatches(deviceIds, [instanceId, list[listIndex]!], after)) {
        for (const deviceId of batch) {
          const hash = partition === undefined ? 0 : fnv1a32(deviceId);
          // Read when the device's turn comes (not with its batch): a device deleted meanwhile is passed over.
          const bytes = hash >= low && hash < high ? this.records.bytesOf(instancePart, deviceId) : undefined;
          // Decoded before skip()'s reads reuse the buffer.
          const device = bytes && decodeScanDevice(bytes, deviceId, instanceId);
          if (!device || skip(device)) {
            if (++skipped >= SCAN_BATCH) {
              yield { device: null, position: { listIndex, afterDeviceId: deviceId }, skipped };
              skipped = 0;
            }
            continue;
          }
          skipped = 0;
          yield { device, position: { listIndex, afterDeviceId: deviceId } };
        }
      }
    }
  }

  /**
   * The device ids of an index range (read through DEVICE_ID_VIEW) in batches of SCAN_BATCH,
   * starting strictly after the entry of `afterDeviceId` when given; no cursor stays open while
   * the caller works.
   */
  private *indexBatches(deviceIds: DeviceIdIndex, prefix: readonly string[], afterDeviceId: string | null): Generator<string[], void, undefined> {
    const range = prefixRange(prefix);
    let start = afterDeviceId === null ? range.start : keyAfter([...prefix, afterDeviceId]);
    for (;;) {
      const ids = Array.from(deviceIds.getKeys({ start, end: range.end, limit: SCAN_BATCH }));
      if (ids.length > 0) yield ids;
      if (ids.length < SCAN_BATCH) return;
      start = keyAfter([...prefix, ids[ids.length - 1]!]);
    }
  }

  /**
   * Whether the device is subscribed to any of the `earlier` interests: walks the device's own
   * interests when it has fewer than there are names, else one point lookup per name. Memory
   * stays flat.
   */
  private subscribedToAny(instanceId: string, deviceId: string, interestCount: number, earlier: EarlierInterests): boolean {
    if (earlier.names.size === 0 || interestCount === 0) return false;
    if (interestCount < earlier.names.size) {
      for (const key of this.db.deviceInterests.getKeys(prefixRange([instanceId, deviceId]))) {
        if (earlier.names.has(lastKeyPart(key))) return true;
      }
      return false;
    }
    const deviceKey = encodeKey([instanceId, deviceId]);
    for (const nameKey of earlier.keys) {
      if (this.db.deviceInterests.doesExist(joinKeys(deviceKey, nameKey))) return true;
    }
    return false;
  }
}
