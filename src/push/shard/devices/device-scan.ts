/**
 * The fan-out walk over one shard's device indexes: every device subscribed to any of a list
 * of interests (each once) or belonging to any of a list of users, resumable from a
 * ScanPosition, never holding a cursor or read transaction between yields.
 */
import { decodeScanDevice, type ScanDevice } from './device-record.js';
import type { DeviceDatabases, IndexDatabase } from './device-databases.js';
import { encodeKey, joinKeys, keyAfter, keyAfterKey, keyPartFrom, lastKeyPart, lastPartOffset, prefixRange } from '../../keys.js';

/**
 * How far a publish fan-out got, so an interrupted one resumes after a restart without
 * skipping or repeating devices. `listIndex` indexes the list after normaliseScanList();
 * the scan continues strictly after `afterDeviceId` (null: from the start of that entry).
 * Plain JSON-safe data; persist it as is.
 */
export interface ScanPosition {
  readonly listIndex: number;
  readonly afterDeviceId: string | null;
}

/** One device of a fan-out, with the position to resume from once it has been handled. */
export interface ScannedDevice {
  device: ScanDevice;
  position: ScanPosition;
}

/**
 * Yielded by the step scans after SCAN_BATCH index entries in a row were passed over without
 * a device (de-duplicated, or stale), so that one `next()` never walks an unbounded stretch:
 * the caller should let other work run before pulling again. `position` is where the scan
 * stands (resuming from it skips nothing that was not yet handled).
 */
export interface ScanProgress {
  device: null;
  position: ScanPosition;
  /** Index entries passed over since the last device or progress step. */
  skipped: number;
}

/** What the step scans yield: a device to handle, or a progress step. */
export type ScanStep = ScannedDevice | ScanProgress;

/**
 * Index keys read per cursor during a fan-out (the cursor is closed between batches), and the
 * most index entries a step scan passes over without yielding.
 */
export const SCAN_BATCH = 256;

/**
 * The order in which scanInterests()/scanUsers() walk their list: sorted and de-duplicated,
 * so a ScanPosition means the same thing after a restart.
 */
export function normaliseScanList(names: readonly string[]): string[] {
  return [...new Set(names)].sort();
}

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
 * A key encoding for reading an index `(instanceId, name, deviceId)` as the record keys
 * `(instanceId, deviceId)` of its devices: lmdb-js hands readKey the stored bytes, and the
 * record key is built from them in one allocation (no copy of the index key first, no
 * decoding). Bounds are written as they are (encoded index keys). Scans only.
 */
const RECORD_KEY_VIEW = {
  writeKey(key: Uint8Array, target: Uint8Array, start: number): number {
    target.set(key, start);
    return start + key.length;
  },
  readKey(source: Uint8Array, start: number, end: number): Buffer {
    const instanceEnd = source.indexOf(0x00, start);
    let lastStart = end;
    while (source[lastStart - 1] !== 0x00) lastStart--;
    const key = Buffer.allocUnsafe(instanceEnd - start + 1 + end - lastStart);
    let at = 0;
    for (let i = start; i <= instanceEnd; i++) key[at++] = source[i]!;
    for (let i = lastStart; i < end; i++) key[at++] = source[i]!;
    return key;
  },
};

/** The interests a multi-interest scan has already walked, by name and as encoded key parts. */
class EarlierInterests {
  readonly names: ReadonlySet<string>;
  readonly keys: readonly Buffer[];

  constructor(names: readonly string[]) {
    this.names = new Set(names);
    this.keys = names.map((name) => encodeKey([name]));
  }
}

/** The step scans of one shard's device databases (DeviceStore.scanInterestSteps / scanUserSteps). */
export class DeviceScan {
  /** The two fan-out indexes read through RECORD_KEY_VIEW. */
  private readonly interestRecordKeys: IndexDatabase;
  private readonly userRecordKeys: IndexDatabase;

  /** Opens the record-key views of the indexes; must not run inside a transaction. */
  constructor(private readonly db: DeviceDatabases) {
    const view = { keyEncoder: RECORD_KEY_VIEW, encoding: 'binary' } as const;
    this.interestRecordKeys = db.root.openDB<Uint8Array, Uint8Array>('push/interests', view);
    this.userRecordKeys = db.root.openDB<Uint8Array, Uint8Array>('push/users', view);
  }

  interestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition): Generator<ScanStep, void, undefined> {
    return this.indexSteps(instanceId, this.interestRecordKeys, interests, resumeFrom, (list, listIndex) => {
      const earlier = new EarlierInterests(list.slice(0, listIndex));
      return (device, deviceId, deviceKey) => this.subscribedToAny(instanceId, deviceId, deviceKey, device.interestCount, earlier);
    });
  }

  userSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition): Generator<ScanStep, void, undefined> {
    return this.indexSteps(instanceId, this.userRecordKeys, userIds, resumeFrom, (list, listIndex) => {
      const userId = list[listIndex]!;
      return (device) => device.userId !== userId;
    });
  }

  /**
   * The devices of `deviceIds` this shard holds (one point read each), in normaliseScanList
   * order; ids held elsewhere or unknown are passed over like stale index entries.
   */
  *deviceSteps(instanceId: string, deviceIds: readonly string[], resumeFrom?: ScanPosition): Generator<ScanStep, void, undefined> {
    checkScanPosition(resumeFrom);
    const list = normaliseScanList(deviceIds);
    // A position names the last id handled: resume with the next one.
    const first = resumeFrom === undefined ? 0 : resumeFrom.listIndex + (resumeFrom.afterDeviceId === null ? 0 : 1);
    let skipped = 0;
    for (let listIndex = first; listIndex < list.length; listIndex++) {
      const deviceId = list[listIndex]!;
      const bytes = this.db.devices.getBinaryFast(encodeKey([instanceId, deviceId]));
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
   * The step scan behind scanInterestSteps/scanUserSteps: walks `recordKeys` (an index read
   * through RECORD_KEY_VIEW) under each name of the
   * normalised `names` list from `resumeFrom`, yielding each device whose record exists and is
   * not skipped by `skipFor(list, listIndex)` (built once per list entry), and a ScanProgress
   * step after every SCAN_BATCH entries in a row passed over.
   */
  private *indexSteps(
    instanceId: string,
    recordKeys: IndexDatabase,
    names: readonly string[],
    resumeFrom: ScanPosition | undefined,
    skipFor: (list: readonly string[], listIndex: number) => (device: ScanDevice, deviceId: string, deviceKey: Buffer) => boolean,
  ): Generator<ScanStep, void, undefined> {
    checkScanPosition(resumeFrom);
    const list = normaliseScanList(names);
    const idStart = encodeKey([instanceId]).length + 1;
    let after = resumeFrom?.afterDeviceId ?? null;
    let skipped = 0;
    for (let listIndex = resumeFrom?.listIndex ?? 0; listIndex < list.length; listIndex++, after = null) {
      const skip = skipFor(list, listIndex);
      for (const batch of this.indexBatches(recordKeys, [instanceId, list[listIndex]!], after)) {
        for (const deviceKey of batch) {
          // The index hands out record keys (RECORD_KEY_VIEW): the device id's bytes as stored.
          const deviceId = keyPartFrom(deviceKey, idStart);
          const bytes = this.db.devices.getBinaryFast(deviceKey);
          // Decoded before skip()'s reads reuse the buffer.
          const device = bytes && decodeScanDevice(bytes, deviceId, instanceId);
          if (!device || skip(device, deviceId, deviceKey)) {
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
   * The record keys (RECORD_KEY_VIEW) of an index range in batches of SCAN_BATCH, starting
   * strictly after the entry of `afterDeviceId` when given; no cursor stays open while the
   * caller works.
   */
  private *indexBatches(recordKeys: IndexDatabase, prefix: readonly string[], afterDeviceId: string | null): Generator<Buffer[], void, undefined> {
    const range = prefixRange(prefix);
    const prefixKey = encodeKey(prefix);
    let start = afterDeviceId === null ? range.start : keyAfter([...prefix, afterDeviceId]);
    for (;;) {
      const keys = Array.from(recordKeys.getKeys({ start, end: range.end, limit: SCAN_BATCH })) as unknown as Buffer[];
      if (keys.length > 0) yield keys;
      if (keys.length < SCAN_BATCH) return;
      // The index key of the batch's last device, and the first key after it.
      const last = keys[keys.length - 1]!;
      start = keyAfterKey(joinKeys(prefixKey, last, lastPartOffset(last)));
    }
  }

  /**
   * Whether the device (`deviceKey` = its record's key) is subscribed to any of the `earlier`
   * interests: walks the device's own interests when it has fewer than there are names, else
   * one point lookup per name. Memory stays flat.
   */
  private subscribedToAny(instanceId: string, deviceId: string, deviceKey: Buffer, interestCount: number, earlier: EarlierInterests): boolean {
    if (earlier.names.size === 0 || interestCount === 0) return false;
    if (interestCount < earlier.names.size) {
      for (const key of this.db.deviceInterests.getKeys(prefixRange([instanceId, deviceId]))) {
        if (earlier.names.has(lastKeyPart(key))) return true;
      }
      return false;
    }
    for (const nameKey of earlier.keys) {
      if (this.db.deviceInterests.doesExist(joinKeys(deviceKey, nameKey))) return true;
    }
    return false;
  }
}
