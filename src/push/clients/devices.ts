/**
 * Main-thread client of push devices: sends each device request to the shard that owns the
 * device (deviceShardFor) and answers the per-user questions, whose devices spread over every
 * shard, by asking all of them. Route handlers never compute a shard themselves.
 */
import { deviceShardFor } from '../../shards/hash.js';
import type { ShardRequestOf, ShardRequestType, ShardResponseOf } from '../../shards/messages.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { DeviceShardApi } from '../messages/devices.js';

/** The requests addressed to one device (they carry its id). */
type DeviceRequestType = {
  [K in ShardRequestType<DeviceShardApi>]: ShardRequestOf<DeviceShardApi, K> extends { deviceId: string } ? K : never;
}[ShardRequestType<DeviceShardApi>];

export class DevicesClient {
  constructor(private readonly shards: ShardRequester<DeviceShardApi>) {}

  /** Sends a request about one device to the shard that owns it. */
  request<K extends DeviceRequestType>(message: ShardRequestOf<DeviceShardApi, K> & { deviceId: string }): Promise<ShardResponseOf<DeviceShardApi, K>> {
    return this.shards.request(deviceShardFor(message.deviceId, this.shards.shardCount), message);
  }

  /** Devices of the user on every shard but the one owning `deviceId` (the devices-per-user limit). */
  async countUserDevicesElsewhere(instanceId: string, userId: string, deviceId: string): Promise<number> {
    const own = deviceShardFor(deviceId, this.shards.shardCount);
    const counts = await this.shards.broadcast({ type: 'device.countUserDevices', instanceId, userId });
    return counts.reduce((sum, c, shard) => (shard === own ? sum : sum + c.count), 0);
  }

  /** Deletes every device of the user, on every shard; resolves once all have committed. */
  async deleteUser(instanceId: string, userId: string): Promise<void> {
    await this.shards.broadcast({ type: 'device.deleteUser', instanceId, userId });
  }
}
