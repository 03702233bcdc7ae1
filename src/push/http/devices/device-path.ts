/**
 * The device API's paths, checked: the instance, the platform and the device id, with the
 * answers Beams gives for each that is wrong (404 PLATFORM_NOT_FOUND, DEVICE_NOT_FOUND, 400
 * DEVICE_ID_INVALID, DEVICE_ID_MISSING), and an interest name in the path.
 */
import { HeraldError } from '../../../errors.js';
import type { RequestContext } from '../../../http/uws-http.js';
import type { PushInstanceConfig } from '../../../config/schema.js';
import type { ServerContext } from '../../../server-context.js';
import { isPlatform, type Platform } from '../../platform.js';
import { quote, requireInstance } from '../common.js';
import { isDeviceIdOf } from './device-id.js';
import { requireInterestName } from './fields.js';

/** How a handler treats a path device id that Herald could not have issued. */
export type BadIdPolicy = 'not-found' | 'invalid';

/** The parts of a device path, checked. */
export interface DeviceTarget {
  instance: PushInstanceConfig;
  platform: Platform;
  deviceId: string;
}

/** The platform named in a path; 404 PLATFORM_NOT_FOUND for a missing or unknown one. */
export function requirePlatform(name: string | undefined): Platform {
  if (!name) throw new HeraldError('PLATFORM_NOT_FOUND', 'Device platform missing from path: use apns, fcm or web');
  if (!isPlatform(name)) throw new HeraldError('PLATFORM_NOT_FOUND', `Unknown device platform ${quote(name)}: use apns, fcm or web`);
  return name;
}

/**
 * Instance, platform and device id of a device path. An id Herald could not have issued for
 * this platform is "device not found" (404) or "device id not valid" (400), as each endpoint
 * answers it on Beams (`badId` says which); `null` means the caller handles it (idempotent delete).
 */
export function deviceTarget(ctx: Pick<ServerContext, 'pushInstances'>, req: RequestContext, badId: BadIdPolicy): DeviceTarget;
export function deviceTarget(ctx: Pick<ServerContext, 'pushInstances'>, req: RequestContext, badId: 'absent'): DeviceTarget | null;
export function deviceTarget(ctx: Pick<ServerContext, 'pushInstances'>, req: RequestContext, badId: BadIdPolicy | 'absent'): DeviceTarget | null {
  const instance = requireInstance(ctx, req.params['instanceId']);
  const platform = requirePlatform(req.params['platform']);
  const deviceId = req.params['deviceId'];
  if (!deviceId) throw new HeraldError('DEVICE_ID_MISSING');
  if (!isDeviceIdOf(deviceId, platform)) {
    if (badId === 'absent') return null;
    if (badId === 'invalid') {
      throw new HeraldError('DEVICE_ID_INVALID', `Device id ${quote(deviceId)} is not a valid ${platform} device id`);
    }
    throw deviceNotFound({ deviceId, platform });
  }
  return { instance, platform, deviceId };
}

/** 404 DEVICE_NOT_FOUND for the device of a path. */
export function deviceNotFound(t: Pick<DeviceTarget, 'deviceId' | 'platform'>): HeraldError {
  return new HeraldError('DEVICE_NOT_FOUND', `Could not find the ${t.platform} device ${quote(t.deviceId)}`);
}

/** What a shard request names of the device: its instance and id. */
export function deviceKey(t: DeviceTarget): { instanceId: string; deviceId: string } {
  return { instanceId: t.instance.instanceId, deviceId: t.deviceId };
}

/** The interest named in the path (D14, D15), checked. */
export function interestFromPath(req: RequestContext): string {
  const name = req.params['interest'];
  if (!name) throw new HeraldError('INTEREST_NAME_MISSING');
  return requireInterestName(name);
}
