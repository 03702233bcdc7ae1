/** The cross-check of one shard's device databases: for tests and offline tools (the `device.checkConsistency` test hook). */
import { decodeDeviceRecord } from './device-record.js';
import { interestsOf, readRecord, type DeviceDatabases } from './device-databases.js';
import { decodeKey, encodeKey, prefixRange } from '../../keys.js';

/**
 * Cross-checks the three indexes against the device records (of one instance, or all) and
 * returns a description of each disagreement; empty means consistent. Reads everything: for
 * tests and offline checks, not request paths.
 */
export function checkDeviceConsistency(db: DeviceDatabases, instanceId?: string): string[] {
  const problems: string[] = [];
  const range = instanceId === undefined ? {} : prefixRange([instanceId]);

  for (const { key, value } of db.devices.getRange(range)) {
    const record = decodeDeviceRecord(value);
    const parts = decodeKey(key);
    if (parts.length !== 2) {
      problems.push(`device key has ${parts.length} parts: ${JSON.stringify(parts)}`);
      continue;
    }
    const [instance, deviceId] = parts as [string, string];
    const where = `device ${instance}/${deviceId}`;
    let subscriptions = 0;
    for (const interest of interestsOf(db, instance, deviceId)) {
      subscriptions++;
      if (!db.interestIndex.doesExist(encodeKey([instance, interest, deviceId]))) {
        problems.push(`${where}: interest ${interest} missing from the interest index`);
      }
    }
    if (subscriptions !== record.interestCount) {
      problems.push(`${where}: interestCount ${record.interestCount} but ${subscriptions} interests indexed`);
    }
    if (record.userId !== undefined && !db.userIndex.doesExist(encodeKey([instance, record.userId, deviceId]))) {
      problems.push(`${where}: user ${record.userId} missing from the user index`);
    }
  }

  for (const [instance, interest, deviceId] of tripleKeys(db.interestIndex.getKeys(range), 'interest index', problems)) {
    if (!db.deviceInterests.doesExist(encodeKey([instance, deviceId, interest]))) {
      problems.push(`interest index ${instance}/${interest}/${deviceId}: no device-interest entry`);
    }
  }

  for (const [instance, deviceId, interest] of tripleKeys(db.deviceInterests.getKeys(range), 'device-interest', problems)) {
    if (!db.devices.doesExist(encodeKey([instance, deviceId]))) {
      problems.push(`device-interest ${instance}/${deviceId}/${interest}: no such device`);
    }
  }

  for (const [instance, userId, deviceId] of tripleKeys(db.userIndex.getKeys(range), 'user index', problems)) {
    const record = readRecord(db, encodeKey([instance, deviceId]));
    if (!record) problems.push(`user index ${instance}/${userId}/${deviceId}: no such device`);
    else if (record.userId !== userId) {
      problems.push(`user index ${instance}/${userId}/${deviceId}: device belongs to ${record.userId ?? 'no user'}`);
    }
  }
  return problems;
}

/** The index keys decoded, each of three parts; a key of another length is a problem, reported and skipped. */
function* tripleKeys(keys: Iterable<Uint8Array>, index: string, problems: string[]): Generator<[string, string, string]> {
  for (const key of keys) {
    const parts = decodeKey(key);
    if (parts.length === 3) yield parts as [string, string, string];
    else problems.push(`${index} key has ${parts.length} parts: ${JSON.stringify(parts)}`);
  }
}
