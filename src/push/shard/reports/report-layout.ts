/**
 * The delivery reports' databases as the reshard sees them (src/shards/shard-layout.ts):
 * `push/reports` is keyed by device and moves, as bytes, to the device's shard; the per-shard
 * counts of `push/report-counts` are recounted from the moved reports per new shard, and what
 * the old counts held beyond their records goes to the publish's home shard.
 */
import { decodeKey, encodeKey } from '../../keys.js';
import { deviceShardFor, shardForKey } from '../../../shards/hash.js';
import type { ShardLayout } from '../../../shards/shard-layout.js';
import { deviceIdOf } from '../devices/device-layout.js';
import { REPORT_COUNTS_DATABASE, REPORTS_DATABASE } from './report-store.js';

interface Counts {
  delivered: number;
  opened: number;
}

interface ReportTally {
  instanceId: string;
  publishId: string;
  /** Counts of the old shards together. */
  oldTotal: Counts;
  /** Records per new shard. */
  perShard: Map<number, Counts>;
}

/** Report keys are `[instanceId, publishId, kind, deviceId]`. */
const devicePart = (parts: string[]): string | undefined => parts[3];

export const reportLayout: ShardLayout = {
  databases: [
    { name: REPORTS_DATABASE, encoding: 'bytes', oneForOne: true },
    { name: REPORT_COUNTS_DATABASE, encoding: 'binary-keys' },
  ],
  copy(old, out) {
    const tallies = new Map<string, ReportTally>();
    const tallyOf = (instanceId: string, publishId: string): ReportTally => {
      const id = JSON.stringify([instanceId, publishId]);
      let tally = tallies.get(id);
      if (!tally) tallies.set(id, (tally = { instanceId, publishId, oldTotal: { delivered: 0, opened: 0 }, perShard: new Map() }));
      return tally;
    };
    // Reports: to the device's shard, tallied per new shard for the counts.
    for (let i = 0; i < old.count; i++) {
      for (const record of old.records(i, REPORTS_DATABASE)) {
        const shard = deviceShardFor(deviceIdOf(REPORTS_DATABASE, record, devicePart), out.count);
        out.put(shard, REPORTS_DATABASE, record.key, record.value);
        const parts = decodeKey(record.key as Uint8Array);
        const perShard = tallyOf(parts[0]!, parts[1]!).perShard;
        const c = perShard.get(shard) ?? { delivered: 0, opened: 0 };
        if (parts[2] === 'delivery') c.delivered++;
        else if (parts[2] === 'open') c.opened++;
        perShard.set(shard, c);
      }
    }
    // Counts: recounted per new shard; what old counts held beyond their records stays, on the home shard.
    for (let i = 0; i < old.count; i++) {
      for (const { key, value } of old.records(i, REPORT_COUNTS_DATABASE)) {
        const [instanceId, publishId] = decodeKey(key as Uint8Array) as [string, string];
        const c = value as Partial<Counts>;
        const tally = tallyOf(instanceId, publishId);
        tally.oldTotal.delivered += c.delivered ?? 0;
        tally.oldTotal.opened += c.opened ?? 0;
      }
    }
    for (const tally of tallies.values()) {
      const home = shardForKey(tally.publishId, out.count);
      let delivered = 0;
      let opened = 0;
      for (const c of tally.perShard.values()) {
        delivered += c.delivered;
        opened += c.opened;
      }
      const extra = { delivered: Math.max(0, tally.oldTotal.delivered - delivered), opened: Math.max(0, tally.oldTotal.opened - opened) };
      if (extra.delivered > 0 || extra.opened > 0 || tally.perShard.size === 0) {
        const c = tally.perShard.get(home) ?? { delivered: 0, opened: 0 };
        tally.perShard.set(home, { delivered: c.delivered + extra.delivered, opened: c.opened + extra.opened });
      }
      for (const [shard, c] of tally.perShard) out.put(shard, REPORT_COUNTS_DATABASE, encodeKey([tally.instanceId, tally.publishId]), c);
    }
  },
};
