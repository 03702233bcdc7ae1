/**
 * The push benchmark's synthetic audience: device `i` (0 ≤ i < devices) is fully determined by
 * its index, so the seeder (one worker per shard), the bare HTTP/2 ceiling and the checks all
 * derive the same tokens without sharing state.
 *
 * - Platform: half APNs, half FCM, chosen by a hash of `i` (not its parity) so every interest
 *   gets both.
 * - Interests, nested so publishes overlap: `all` (every device), `big` (every 10th), `medium`
 *   (every 100th, the benchmark's warm-up publish), `small` (every 1000th);
 *   `small` ⊂ `medium` ⊂ `big` ⊂ `all`.
 * - Tokens of realistic size: APNs 64 hex digits, FCM about 160 printable characters.
 */
import { createHash } from 'node:crypto';
import type { Platform } from '../../src/push/platform.js';
import { fnv1a32 } from '../../src/shards/hash.js';

/** The push instance the bench seeds and publishes to (Herald's built-in development instance). */
export const BENCH_INSTANCE = Object.freeze({ instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'push-secret' });

/** APNs topic of every APNs device. */
export const BENCH_BUNDLE_ID = 'com.herald.bench';

/** An interest of the dataset and which devices hold it: every `every`-th device index. */
export interface BenchInterest {
  name: string;
  every: number;
}

/** The interests, largest first. */
export const BENCH_INTERESTS: readonly BenchInterest[] = [
  { name: 'all', every: 1 },
  { name: 'big', every: 10 },
  { name: 'medium', every: 100 },
  { name: 'small', every: 1000 },
];

/** Everything a device of the dataset is registered with. */
export interface BenchDevice {
  platform: Platform;
  token: string;
  bundleIdentifier?: string;
  metadata: Record<string, string>;
  interests: string[];
}

/** Device `i`'s platform. */
export function platformOf(i: number): Platform {
  return (fnv1a32(String(i)) & 1) === 0 ? 'apns' : 'fcm';
}

/** Device `i`'s gateway token (already in the normalised form checkGatewayToken gives). */
export function tokenOf(i: number, platform: Platform = platformOf(i)): string {
  const digest = createHash('sha256').update(`herald-bench-device-${i}`).digest();
  if (platform === 'apns') return digest.toString('hex');
  // FCM registration tokens look like `<22 chars>:APA91b<~130 chars>`.
  const tail = Buffer.concat([digest, createHash('sha256').update(digest).digest(), digest, digest]).toString('base64url');
  return `${digest.toString('base64url').slice(0, 22)}:APA91b${tail.slice(0, 134)}`;
}

/** Device `i` of the dataset. */
export function benchDevice(i: number): BenchDevice {
  const platform = platformOf(i);
  const interests = BENCH_INTERESTS.filter((interest) => i % interest.every === 0).map((interest) => interest.name);
  return platform === 'apns'
    ? { platform, token: tokenOf(i, platform), bundleIdentifier: BENCH_BUNDLE_ID, metadata: { sdkVersion: '4.0.0', iosVersion: '17.4' }, interests }
    : { platform, token: tokenOf(i, platform), metadata: { sdkVersion: '2.1.0', androidVersion: '14' }, interests };
}

/** Devices of a dataset of `devices` devices holding `interest`. */
export function audienceSize(interest: BenchInterest, devices: number): number {
  return Math.ceil(devices / interest.every);
}

/** The publish body the benchmark sends (P1): one alert for each of APNs and FCM. */
export function publishBody(interests: readonly string[]): Record<string, unknown> {
  return {
    interests,
    apns: { aps: { alert: { title: 'Herald bench', body: 'A notification of a typical size for the push benchmark.' } } },
    fcm: { notification: { title: 'Herald bench', body: 'A notification of a typical size for the push benchmark.' } },
  };
}
