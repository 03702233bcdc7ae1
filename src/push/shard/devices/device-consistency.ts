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

  for (const key of db.interestIndex.getKeys(range)) {
    const parts = decodeKey(key);
    if (parts.length !== 3) {
      problems.push(`interest index key has ${parts.length} parts: ${JSON.stringify(parts)}`);
      continue;
    }
    const [instance, interest, deviceId] = parts as [string, string, string];
    if (!db.deviceInterests.doesExist(encodeKey([instance, deviceId, interest]))) {
      problems.push(`interest index ${instance}/${interest}/${deviceId}: no device-interest entry`);
    }
  }

  for (const key of db.deviceInterests.getKeys(range)) {
    const parts = decodeKey(key);
    if (parts.length !== 3) {
      problems.push(`device-interest key has ${parts.length} parts: ${JSON.stringify(parts)}`);
      continue;
    }
    const [instance, deviceId, interest] = parts as [string, string, string];
    if (!db.devices.doesExist(encodeKey([instance, deviceId]))) {
      problems.push(`device-interest ${instance}/${deviceId}/${interest}: no such device`);
    }
  }

  for (const key of db.userIndex.getKeys(range)) {
    const parts = decodeKey(key);
    if (parts.length !== 3) {
      problems.push(`user index key has ${parts.length} parts: ${JSON.stringify(parts)}`);
      continue;
    }
    const [instance, userId, deviceId] = parts as [string, string, string];
    const record = readRecord(db, encodeKey([instance, deviceId]));
    if (!record) problems.push(`user index ${instance}/${userId}/${deviceId}: no such device`);
    else if (record.userId !== userId) {
      problems.push(`user index ${instance}/${userId}/${deviceId}: device belongs to ${record.userId ?? 'no user'}`);
    }
  }
  return problems;
}
