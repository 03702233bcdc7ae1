/**
 * Device ids. The main thread computes a device's id from its gateway token, so a request can
 * be routed to the owning shard (deviceShardFor) before anything is stored:
 *
 *   <platform> "-" hex(HMAC-SHA256(installSecret, instanceId \0 platform \0 token))[0..32)
 *
 * Deterministic, so registering the same token again answers the same device (with its
 * interests; the user association is cleared) instead of creating a duplicate; unguessable without the installation
 * secret, and 128 bits leave no practical chance of collision. Known limitation: after a token
 * refresh (D9) the device keeps its id, but registering the NEW token creates another device
 * (its id derives from the new token).
 */
import { createHmac } from 'node:crypto';
import type { Platform } from '../../platform.js';

/** Hex digits of the HMAC kept in an id: 128 bits. */
const ID_HEX_LENGTH = 32;
const DEVICE_ID = /^(apns|fcm|web)-([0-9a-f]{32})$/;

/** The id of the device holding `token` on `platform` of an instance. */
export function deviceIdFor(installSecret: string, instanceId: string, platform: Platform, token: string): string {
  const mac = createHmac('sha256', Buffer.from(installSecret, 'hex'))
    .update(`${instanceId}\u0000${platform}\u0000${token}`, 'utf8')
    .digest('hex');
  return `${platform}-${mac.slice(0, ID_HEX_LENGTH)}`;
}

/** True when `id` has the shape of an id Herald issues for `platform` (prefix included). */
export function isDeviceIdOf(id: string, platform: Platform): boolean {
  const match = DEVICE_ID.exec(id);
  return match !== null && match[1] === platform;
}
