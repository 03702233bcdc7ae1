/** The push platforms: the one list, used by both threads (paths, device records, counts, gateways). */

/** The three push platforms Beams supports; also the device registration kinds. */
export type Platform = 'apns' | 'fcm' | 'web';

/** Every platform, in the order Herald lists them (paths, counts, webhook results). */
export const PLATFORMS: readonly Platform[] = Object.freeze(['apns', 'fcm', 'web'] as const);

/** True when `value` names a platform Herald serves (a path segment, a stored field). */
export function isPlatform(value: string): value is Platform {
  return (PLATFORMS as readonly string[]).includes(value);
}
