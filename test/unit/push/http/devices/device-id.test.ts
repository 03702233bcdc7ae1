import { describe, expect, it } from 'vitest';
import { deviceIdFor, isDeviceIdOf } from '../../../../../src/push/http/devices/device-id.js';
import { isPlatform } from '../../../../../src/push/platform.js';

const SECRET = 'ab'.repeat(32);
const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';

describe('device ids', () => {
  it('are deterministic per (secret, instance, platform, token) and prefixed with the platform', () => {
    const id = deviceIdFor(SECRET, INSTANCE, 'fcm', 'token-1');
    expect(id).toMatch(/^fcm-[0-9a-f]{32}$/);
    expect(deviceIdFor(SECRET, INSTANCE, 'fcm', 'token-1')).toBe(id);
    const others = [
      deviceIdFor('cd'.repeat(32), INSTANCE, 'fcm', 'token-1'),
      deviceIdFor(SECRET, '00000000-0000-4000-8000-000000000000', 'fcm', 'token-1'),
      deviceIdFor(SECRET, INSTANCE, 'web', 'token-1').replace('web-', 'fcm-'),
      deviceIdFor(SECRET, INSTANCE, 'fcm', 'token-2'),
    ];
    for (const other of others) expect(other).not.toBe(id);
  });

  it('cannot be shifted between fields (the separator is part of the MAC input)', () => {
    expect(deviceIdFor(SECRET, INSTANCE, 'fcm', 'a\u0000b')).not.toBe(deviceIdFor(SECRET, INSTANCE, 'fcm', 'a'));
  });

  it('are recognised only with their own platform prefix and exact shape', () => {
    const id = deviceIdFor(SECRET, INSTANCE, 'apns', 'x');
    expect(isDeviceIdOf(id, 'apns')).toBe(true);
    expect(isDeviceIdOf(id, 'fcm')).toBe(false);
    expect(isDeviceIdOf(id.toUpperCase(), 'apns')).toBe(false);
    expect(isDeviceIdOf(`${id}0`, 'apns')).toBe(false);
    expect(isDeviceIdOf('apns-', 'apns')).toBe(false);
    expect(isDeviceIdOf(`web-${'0'.repeat(32)}`, 'web')).toBe(true);
  });

  it('knows the three platforms', () => {
    expect(['apns', 'fcm', 'web', 'gcm', 'APNS', ''].map(isPlatform)).toEqual([true, true, true, false, false, false]);
  });
});
