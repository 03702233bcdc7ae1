/**
 * What each gateway carries for one publish: the request's platform object plus the
 * `data.pusher` metadata the Beams client SDKs read to report delivery and open
 * (`{instanceId, publishId, hasDisplayableContent, hasData}`):
 *
 * - iOS (APNs): top-level `data` key of the APNs JSON; the SDK reads `userInfo["data"]["pusher"]`.
 * - Android (FCM): the `fcm.data` map; FCM v1 data values are strings, so the FCM client sends
 *   `pusher` as a JSON string, which is what the Android SDK parses (`getStringExtra("pusher")`).
 * - Web: `data.pusher` of the JSON the service worker decrypts (`payload.data.pusher`).
 *
 * `hasDisplayableContent` and `hasData` follow what the SDKs compute themselves: APNs has an
 * `aps.alert`; FCM/web have a non-empty `notification`; `hasData` when the customer's `data`
 * has any key besides `pusher`. A customer `data.pusher` key is replaced by Herald's.
 */
import type { Platform } from '../../platform.js';
import { isObject } from '../../../json.js';

/** The metadata object under `data.pusher`. */
export interface PusherMetadata {
  instanceId: string;
  publishId: string;
  hasDisplayableContent: boolean;
  hasData: boolean;
}

function customerDataKeys(payload: Record<string, unknown>): number {
  const data = payload['data'];
  return isObject(data) ? Object.keys(data).filter((key) => key !== 'pusher').length : 0;
}

function hasDisplayableContent(platform: Platform, payload: Record<string, unknown>): boolean {
  if (platform === 'apns') {
    const aps = payload['aps'];
    return isObject(aps) && aps['alert'] !== undefined && aps['alert'] !== null;
  }
  const notification = payload['notification'];
  return isObject(notification) && Object.keys(notification).length > 0;
}

/** `data.pusher` for one platform's payload. */
export function pusherMetadata(platform: Platform, payload: Record<string, unknown>, instanceId: string, publishId: string): PusherMetadata {
  return {
    instanceId,
    publishId,
    hasDisplayableContent: hasDisplayableContent(platform, payload),
    hasData: customerDataKeys(payload) > 0,
  };
}

/**
 * The payload one platform's gateway client gets for every device of the publish: a shallow
 * copy of the request's object with `data` copied and `data.pusher` set. Built once per
 * publish and shard, shared by all its sends (the clients do not mutate it).
 */
export function gatewayPayload(platform: Platform, payload: Record<string, unknown>, instanceId: string, publishId: string): Record<string, unknown> {
  const data = isObject(payload['data']) ? { ...payload['data'] } : {};
  data['pusher'] = pusherMetadata(platform, payload, instanceId, publishId);
  return { ...payload, data };
}
