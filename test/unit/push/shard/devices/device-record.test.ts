import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeDeviceRecord, decodeScanDevice, encodeDeviceRecord, type DeviceRecord } from '../../../../../src/push/shard/devices/device-record.js';

const base: DeviceRecord = { platform: 'fcm', token: 'token-ü-😀-\u0000-end', createdAt: 1_763_000_000_123, interestCount: 5000 };
const optional: Partial<DeviceRecord>[] = [
  {},
  { bundleIdentifier: 'com.example.app' },
  { userId: 'user with spaces and 日本' },
  { metadata: {} },
  { metadata: { sdkVersion: '2.0.0', androidVersion: '' } },
  { bundleIdentifier: '', userId: '', metadata: { 'ü': 'x'.repeat(70_000) } },
];

describe('device records', () => {
  it('round-trips every combination of optional fields, omitting the absent ones', () => {
    for (const a of optional) {
      for (const b of optional) {
        const record: DeviceRecord = { ...base, ...a, ...b };
        const bytes = encodeDeviceRecord(record);
        expect(bytes[0]).toBe(0xc1);
        const decoded = decodeDeviceRecord(new Uint8Array(bytes)); // lmdb-js hands out Buffers or plain Uint8Arrays
        expect(decoded).toStrictEqual(record);
        expect(decodeScanDevice(bytes, 'dev-1', 'inst')).toStrictEqual({
          id: 'dev-1',
          instanceId: 'inst',
          platform: record.platform,
          token: record.token,
          bundleIdentifier: record.bundleIdentifier,
          userId: record.userId,
          interestCount: record.interestCount,
        });
      }
    }
  });

  it('decodes records written as msgpack by earlier versions (lmdb-js default encoder settings)', () => {
    const record: DeviceRecord = { ...base, bundleIdentifier: 'b', metadata: { sdkVersion: '1' }, userId: 'u' };
    const bytes = new Packr({ copyBuffers: true }).pack(record);
    expect(bytes[0]).not.toBe(0xc1);
    expect(decodeDeviceRecord(bytes)).toStrictEqual(record);
    expect(decodeScanDevice(bytes, 'd', 'i')).toMatchObject({ id: 'd', instanceId: 'i', token: base.token, bundleIdentifier: 'b', userId: 'u', interestCount: 5000 });
    const plain = new Packr({ copyBuffers: true }).pack({ platform: 'web', token: 't', createdAt: 1, interestCount: 0 });
    expect(decodeScanDevice(plain, 'd', 'i')).toStrictEqual({
      id: 'd',
      instanceId: 'i',
      platform: 'web',
      token: 't',
      bundleIdentifier: undefined,
      userId: undefined,
      interestCount: 0,
    });
  });

  it('refuses a record format it does not know instead of misreading it', () => {
    const bytes = encodeDeviceRecord(base);
    bytes[1] = 2;
    expect(() => decodeDeviceRecord(bytes)).toThrow(/format 2/);
    expect(() => decodeScanDevice(bytes, 'd', 'i')).toThrow(/format 2/);
  });
});
