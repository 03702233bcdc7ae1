/**
 * The stored value of a device in `push/devices`: a small fixed binary layout instead of
 * msgpack, because decoding it is most of the cost of a publish's recipient-set scan (msgpackr
 * without shared structures re-reads the record definition stored in every value; with shared
 * structures, a structure saved inside a child transaction that later aborts would stay in the
 * encoder's memory but not on disk). The scan reads only what a gateway send needs
 * (decodeScanDevice) and never touches the metadata.
 *
 * Layout (integers little-endian; strings are a uint32 byte length then UTF-8):
 *
 *   0      0xc1, a byte msgpack never uses: values written before this format (msgpack, lmdb-js's
 *          default encoding) still decode, through the same msgpackr settings lmdb-js used
 *   1      format version (1)
 *   2      flags: 1 bundleIdentifier, 2 userId, 4 metadata
 *   3      createdAt, float64 (ms since the Unix epoch)
 *   11     interestCount, uint32
 *   15     platform, token, then bundleIdentifier, userId, and metadata (uint32 pair count, then
 *          key, value, ...) when their flag is set
 */
import { Packr } from 'msgpackr';
import type { Platform } from '../../platform.js';
import type { Device, ScanDevice } from '../../store/device-store.js';

/**
 * A device as stored: the store's Device without its id and instance id, which live in the
 * key. Optional fields are omitted, never undefined. The codec below writes each field itself,
 * so a field added to Device reaches the disk only once the codec writes it.
 */
export type DeviceRecord = Omit<Device, 'id' | 'instanceId'>;

/**
 * A ScanDevice decoded from its LMDB record, with the device's interest count: the LMDB interest
 * scan chooses by it how to check the device's earlier interests (PostgreSQL's scan does that
 * in SQL, and its subscriptions do not carry the count).
 */
export interface RecordScanDevice extends ScanDevice {
  interestCount: number;
}

const MARKER = 0xc1;
const VERSION = 1;
const HAS_BUNDLE_IDENTIFIER = 1;
const HAS_USER_ID = 2;
const HAS_METADATA = 4;
const CREATED_AT = 3;
const INTEREST_COUNT = 11;
const STRINGS = 15;

/** Decodes values written before this format exactly as lmdb-js's default msgpack encoding did. */
const legacyDecoder = new Packr({ copyBuffers: true });

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The record's bytes in the current format. */
export function encodeDeviceRecord(record: DeviceRecord): Buffer {
  const { bundleIdentifier, userId } = record;
  const metadata = record.metadata === undefined ? undefined : Object.entries(record.metadata);
  const strings = [record.platform, record.token];
  if (bundleIdentifier !== undefined) strings.push(bundleIdentifier);
  if (userId !== undefined) strings.push(userId);
  if (metadata !== undefined) for (const [key, value] of metadata) strings.push(key, value);
  let length = STRINGS + (metadata === undefined ? 0 : 4);
  for (const text of strings) length += 4 + Buffer.byteLength(text, 'utf8');

  const bytes = Buffer.allocUnsafe(length);
  bytes[0] = MARKER;
  bytes[1] = VERSION;
  bytes[2] =
    (bundleIdentifier !== undefined ? HAS_BUNDLE_IDENTIFIER : 0) | (userId !== undefined ? HAS_USER_ID : 0) | (metadata !== undefined ? HAS_METADATA : 0);
  bytes.writeDoubleLE(record.createdAt, CREATED_AT);
  bytes.writeUInt32LE(record.interestCount, INTEREST_COUNT);
  let at = STRINGS;
  const writeString = (text: string): void => {
    const written = bytes.write(text, at + 4, 'utf8');
    bytes.writeUInt32LE(written, at);
    at += 4 + written;
  };
  writeString(record.platform);
  writeString(record.token);
  if (bundleIdentifier !== undefined) writeString(bundleIdentifier);
  if (userId !== undefined) writeString(userId);
  if (metadata !== undefined) {
    at = bytes.writeUInt32LE(metadata.length, at);
    for (const [key, value] of metadata) {
      writeString(key);
      writeString(value);
    }
  }
  return bytes;
}

/** Read position of readString(); decoding is synchronous, so one module-level cursor will do. */
let readAt = 0;

/** The string at readAt of a current-format record; moves readAt past it. */
function readString(bytes: Buffer): string {
  const length = bytes.readUInt32LE(readAt);
  const start = readAt + 4;
  readAt = start + length;
  return bytes.toString('utf8', start, readAt);
}

function checkVersion(bytes: Buffer): void {
  if (bytes[1] !== VERSION) throw new Error(`device record format ${bytes[1]} is newer than this Herald understands`);
}

/** The whole record, from bytes in the current or the msgpack format. */
export function decodeDeviceRecord(bytes: Uint8Array): DeviceRecord {
  const buffer = asBuffer(bytes);
  if (buffer[0] !== MARKER) return legacyDecoder.decode(buffer) as DeviceRecord;
  checkVersion(buffer);
  const flags = buffer[2]!;
  readAt = STRINGS;
  const record: DeviceRecord = {
    platform: readString(buffer) as Platform,
    token: readString(buffer),
    createdAt: buffer.readDoubleLE(CREATED_AT),
    interestCount: buffer.readUInt32LE(INTEREST_COUNT),
  };
  if (flags & HAS_BUNDLE_IDENTIFIER) record.bundleIdentifier = readString(buffer);
  if (flags & HAS_USER_ID) record.userId = readString(buffer);
  if (flags & HAS_METADATA) {
    const pairs = buffer.readUInt32LE(readAt);
    readAt += 4;
    const metadata: Record<string, string> = {};
    for (let i = 0; i < pairs; i++) {
      const key = readString(buffer);
      metadata[key] = readString(buffer);
    }
    record.metadata = metadata;
  }
  return record;
}

/** The platform names as bytes, to recognise a stored one without allocating a string. */
const PLATFORM_BYTES: readonly [Platform, Buffer][] = (['apns', 'fcm', 'web'] as const).map((name) => [name, Buffer.from(name, 'latin1')]);

/** The platform at readAt (a shared constant for the three known names); moves readAt past it. */
function readPlatform(bytes: Buffer): Platform {
  const length = bytes.readUInt32LE(readAt);
  const start = readAt + 4;
  for (const [name, nameBytes] of PLATFORM_BYTES) {
    if (nameBytes.length !== length) continue;
    let i = 0;
    while (i < length && bytes[start + i] === nameBytes[i]) i++;
    if (i === length) {
      readAt = start + length;
      return name;
    }
  }
  return readString(bytes) as Platform;
}

/** The last bundle identifier decoded by a scan, as stored and as text: most APNs devices of an instance share one. */
let lastBundleBytes = Buffer.alloc(0);
let lastBundleText = '';

/** The string at readAt, reusing the last one read here when the bytes are the same; moves readAt past it. */
function readBundleIdentifier(bytes: Buffer): string {
  const length = bytes.readUInt32LE(readAt);
  const start = readAt + 4;
  if (length === lastBundleBytes.length) {
    let i = 0;
    while (i < length && bytes[start + i] === lastBundleBytes[i]) i++;
    if (i === length) {
      readAt = start + length;
      return lastBundleText;
    }
  }
  const text = readString(bytes);
  lastBundleBytes = Buffer.from(bytes.subarray(start, readAt));
  lastBundleText = text;
  return text;
}

/** The device `id` of `instanceId` whose record is `bytes`, as a fan-out sees it (the metadata is not read). */
export function decodeScanDevice(bytes: Uint8Array, id: string, instanceId: string): RecordScanDevice {
  const buffer = asBuffer(bytes);
  if (buffer[0] !== MARKER) {
    const record = decodeDeviceRecord(buffer);
    return {
      id,
      instanceId,
      platform: record.platform,
      token: record.token,
      bundleIdentifier: record.bundleIdentifier,
      userId: record.userId,
      interestCount: record.interestCount,
    };
  }
  checkVersion(buffer);
  const flags = buffer[2]!;
  readAt = STRINGS;
  return {
    id,
    instanceId,
    platform: readPlatform(buffer),
    token: readString(buffer),
    bundleIdentifier: flags & HAS_BUNDLE_IDENTIFIER ? readBundleIdentifier(buffer) : undefined,
    userId: flags & HAS_USER_ID ? readString(buffer) : undefined,
    interestCount: buffer.readUInt32LE(INTEREST_COUNT),
  };
}
