/**
 * Shard side of push devices: thin handlers over this shard's device store (push/store/). Every
 * write resolves after the store's durable commit, so the main thread's 200 means durable.
 */
import { requireTestHooks, type ShardArea } from '../../../shards/context.js';
import type { PushAreaDeps } from '../deps.js';
import type { DeviceShardApi, DeviceView } from '../../messages/devices.js';

export function createDeviceArea(deps: PushAreaDeps): ShardArea<DeviceShardApi> {
  const { store } = deps;
  return {
    handlers: {
      'device.register': async ({ instanceId, deviceId, platform, token, bundleIdentifier, metadata }) => {
        const { id, initialInterestSet, created } = await store.register({ instanceId, deviceId, platform, token, bundleIdentifier, metadata });
        return { id, initialInterestSet, created };
      },

      'device.platformCounts': async ({ instanceId }) => ({ counts: await store.platformCounts(instanceId) }),

      'device.get': async ({ instanceId, deviceId }) => {
        const device = await store.get(instanceId, deviceId);
        if (!device) return { device: null };
        const view: DeviceView = { id: device.id, platform: device.platform };
        if (device.userId !== undefined) view.userId = device.userId;
        if (device.metadata !== undefined) view.metadata = device.metadata;
        return { device: view };
      },

      'device.delete': async ({ instanceId, deviceId }) => ({ deleted: await store.delete(instanceId, deviceId) }),

      'device.setMetadata': async ({ instanceId, deviceId, metadata }) => ({
        found: await store.setMetadata(instanceId, deviceId, metadata),
      }),

      'device.setToken': async ({ instanceId, deviceId, token }) => ({ found: await store.setToken(instanceId, deviceId, token) }),

      'device.setUser': async ({ instanceId, deviceId, userId, devicesOnOtherShards, maxDevicesPerUser }) => ({
        outcome: await store.setUserWithinLimit(instanceId, deviceId, userId, devicesOnOtherShards, maxDevicesPerUser),
      }),

      'device.countUserDevices': async ({ instanceId, userId }) => ({ count: await store.countUserDevices(instanceId, userId) }),

      'device.listInterests': async ({ instanceId, deviceId, limit, cursor }) => {
        const page = await store.listInterests(instanceId, deviceId, limit, cursor);
        if (page === 'not-found' || page === 'bad-cursor') return { outcome: page };
        return page.nextCursor === undefined
          ? { outcome: 'ok', interests: page.interests }
          : { outcome: 'ok', interests: page.interests, nextCursor: page.nextCursor };
      },

      'device.replaceInterests': async ({ instanceId, deviceId, interests }) => ({
        outcome: await store.replaceInterests(instanceId, deviceId, interests),
      }),

      'device.addInterest': async ({ instanceId, deviceId, interest }) => ({
        outcome: await store.addInterest(instanceId, deviceId, interest),
      }),

      'device.removeInterest': async ({ instanceId, deviceId, interest }) => ({
        outcome: await store.removeInterest(instanceId, deviceId, interest),
      }),

      'device.deleteUser': async ({ instanceId, userId }) => ({ deleted: await store.deleteUser(instanceId, userId) }),

      'device.checkConsistency': async ({ instanceId }) => {
        requireTestHooks(deps.ctx, 'device.checkConsistency');
        return { problems: await store.checkConsistency(instanceId) };
      },

      'device.storeReady': async ({ installSecret }) => {
        await store.ready();
        return { store: store.kind, installSecret: await store.installSecret(installSecret) };
      },
    },
  };
}
