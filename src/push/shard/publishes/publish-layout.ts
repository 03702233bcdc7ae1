/**
 * The publish records as the reshard sees them (src/shards/shard-layout.ts). A publish still
 * in flight has a per-shard scan position that means nothing under another count, so it
 * refuses the reshard. Finished publishes: the parts of every old shard merged into one
 * (counts summed, times min/max, user outcomes joined) on the publish's home shard, an empty
 * finished part on the others, the retention index rebuilt; monthly usage summed onto shard 0.
 */
import { decodeKey, encodeKey } from '../../keys.js';
import { addGatewayCounts, emptyGatewayCounts, emptyUserBits, orUserBits, userBitsOf, userIndexOf } from '../../publish-results.js';
import { shardForKey } from '../../../shards/hash.js';
import { ReshardError, type NewShards, type OldShards, type ShardLayout } from '../../../shards/shard-layout.js';
import { PUBLISH_DATABASE } from './lmdb-publish-store.js';
import type { CoordinatorRecord, ProgressRecord, ShardReport } from '../../store/publish-record-store.js';

export const publishLayout: ShardLayout = {
  databases: [{ name: PUBLISH_DATABASE, encoding: 'binary-keys' }],
  check: checkPublishesSettled,
  copy: copyPublishes,
};

/**
 * Refuses while a publish is in flight. A finished part whose acknowledgement from the
 * coordinator was not stored yet (`open`) is settled once the coordinator's record is finalized.
 */
function checkPublishesSettled(old: OldShards): void {
  const finalized = new Set<string>();
  const open: string[] = [];
  const busy = new Set<string>();
  for (let shard = 0; shard < old.count; shard++) {
    for (const { key, value } of old.records(shard, PUBLISH_DATABASE)) {
      const [kind, publishId] = decodeKey(key as Uint8Array) as [string, string];
      if (kind === 'coord' && (value as CoordinatorRecord).finalized) finalized.add(publishId);
      else if (kind === 'open') open.push(publishId);
      else if (kind === 'coord-open') busy.add(`${publishId} on shard-${shard}: not finalized`);
      else if (kind === 'progress' && (value as ProgressRecord).state !== 'finished') busy.add(`${publishId} on shard-${shard}: ${(value as ProgressRecord).state}`);
    }
  }
  for (const publishId of open) if (!finalized.has(publishId)) busy.add(`${publishId}: part not reported`);
  if (busy.size > 0) {
    const some = [...busy].slice(0, 5).join('; ');
    throw new ReshardError(
      `${busy.size} publish(es) are still in flight (${some}${busy.size > 5 ? ', …' : ''}); ` +
        'start the server with its current shard count, let them finish, stop it and reshard then',
    );
  }
}


/** Finished publishes: one merged part on the home shard, an empty finished part on the others. */
function copyPublishes(old: OldShards, out: NewShards): void {
  const to = out.count;
  const parts = new Map<string, ProgressRecord[]>();
  const coordinated = new Set<string>();
  const targets = new Map<string, unknown>();
  const usage = new Map<string, { instanceId: string; month: string; notifications: number }>();
  for (let shard = 0; shard < old.count; shard++) {
    for (const { key, value } of old.records(shard, PUBLISH_DATABASE)) {
      const decoded = decodeKey(key as Uint8Array);
      const [kind, id] = decoded as [string, string];
      if (kind === 'progress') {
        const list = parts.get(id) ?? [];
        list.push(value as ProgressRecord);
        parts.set(id, list);
      } else if (kind === 'coord') {
        coordinated.add(id);
      } else if (kind === 'targets') {
        targets.set(id, value);
      } else if (kind === 'usage') {
        const month = decoded[2]!;
        const entry = usage.get(JSON.stringify([id, month])) ?? { instanceId: id, month, notifications: 0 };
        entry.notifications += value as number;
        usage.set(JSON.stringify([id, month]), entry);
      } else if (kind !== 'done' && kind !== 'job' && kind !== 'open') {
        // done: rebuilt below; job and open: left by a settled publish whose ack was not stored, needed no more.
        throw new ReshardError(`${PUBLISH_DATABASE}: unknown record kind ${JSON.stringify(kind)}`);
      }
    }
  }
  for (const [publishId, list] of parts) {
    const merged = mergeParts(list);
    const home = shardForKey(publishId, to);
    const reports: Record<number, ShardReport> = {};
    for (let j = 0; j < to; j++) {
      const part = j === home ? merged : emptyPart(merged);
      out.put(j, PUBLISH_DATABASE, encodeKey(['progress', publishId]), part);
      out.put(j, PUBLISH_DATABASE, encodeKey(['done', String(Math.max(0, Math.floor(part.finishedAt ?? 0))).padStart(13, '0'), publishId]), true);
      reports[j] = {
        publishId,
        shard: j,
        recipients: part.recipients,
        gateways: part.gateways,
        ...(part.users ? { users: { withDevices: part.users.withDevices, deliveredToGateway: part.users.deliveredToGateway } } : {}),
        startedAt: part.startedAt,
        finishedAt: part.finishedAt ?? part.updatedAt,
      };
    }
    if (coordinated.has(publishId)) {
      out.put(home, PUBLISH_DATABASE, encodeKey(['coord', publishId]), { parts: reports, finalized: true } satisfies CoordinatorRecord);
    }
    // The one copy of a user publish's ids goes with its coordinator record, to the home shard.
    if (targets.has(publishId)) out.put(home, PUBLISH_DATABASE, encodeKey(['targets', publishId]), targets.get(publishId));
  }
  for (const { instanceId, month, notifications } of usage.values()) {
    out.put(0, PUBLISH_DATABASE, encodeKey(['usage', instanceId, month]), notifications);
  }
}

function mergeParts(list: ProgressRecord[]): ProgressRecord {
  const first = list[0]!;
  const gateways = emptyGatewayCounts();
  let recipients = 0;
  let startedAt: number | null = null;
  let finishedAt: number | null = null;
  let updatedAt = 0;
  for (const part of list) {
    addGatewayCounts(gateways, part.gateways);
    recipients += part.recipients;
    if (part.startedAt !== null) startedAt = startedAt === null ? part.startedAt : Math.min(startedAt, part.startedAt);
    if (part.finishedAt !== null) finishedAt = finishedAt === null ? part.finishedAt : Math.max(finishedAt, part.finishedAt);
    updatedAt = Math.max(updatedAt, part.updatedAt);
  }
  const merged: ProgressRecord = {
    ...first,
    state: 'finished',
    startedAt,
    finishedAt,
    updatedAt,
    recipients,
    gateways,
    position: null,
    reported: true,
  };
  if (list.some((p) => p.cancelled)) merged.cancelled = true;
  else delete merged.cancelled;
  if (first.users) {
    // Records of earlier versions hold id lists and the targets: bits over the sorted targets.
    const index = userIndexOf(first.users.targets ?? []);
    let withDevices = emptyUserBits(index.length);
    let deliveredToGateway = emptyUserBits(index.length);
    for (const part of list) {
      withDevices = orUserBits(withDevices, userBitsOf(part.users?.withDevices, index));
      deliveredToGateway = orUserBits(deliveredToGateway, userBitsOf(part.users?.deliveredToGateway, index));
    }
    merged.users = first.users.targets === undefined ? { withDevices, deliveredToGateway } : { targets: first.users.targets, withDevices, deliveredToGateway };
  }
  return merged;
}

function emptyPart(merged: ProgressRecord): ProgressRecord {
  const part: ProgressRecord = { ...merged, recipients: 0, gateways: emptyGatewayCounts() };
  if (merged.users) part.users = { withDevices: emptyUserBits(0), deliveredToGateway: emptyUserBits(0) };
  return part;
}
