/**
 * Validation of device API inputs that are not paths: metadata objects, interest sets, the
 * interest page size. Each returns the clean value or throws a HeraldError whose description
 * names the offending field.
 */
import { HeraldError } from '../../../errors.js';
import type { Platform } from '../../platform.js';
import { isValidInterestName, MAX_INTERESTS_PER_DEVICE } from '../../interest-name.js';
import { quote } from '../common.js';

/** Metadata fields kept per platform (apnsMetadata, fcmMetadata; the web SDK sends sdkVersion). Others are dropped. */
export const METADATA_FIELDS: Readonly<Record<Platform, readonly string[]>> = {
  apns: ['sdkVersion', 'iosVersion', 'macosVersion'],
  fcm: ['sdkVersion', 'androidVersion'],
  web: ['sdkVersion'],
};

/** Longest metadata value kept, characters. */
const MAX_METADATA_VALUE_LENGTH = 256;

/** Interests per D12 page: default and maximum. */
export const MAX_INTEREST_PAGE = 100;

/**
 * The platform's metadata fields of `value`: each must be a string (null counts as absent);
 * other fields are ignored. 400 INVALID_METADATA when `value` is not an object or a field is not a string.
 */
export function parseMetadata(platform: Platform, value: unknown, where = 'metadata'): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HeraldError('INVALID_METADATA', `${where} must be a JSON object of strings`);
  }
  const metadata: Record<string, string> = {};
  for (const field of METADATA_FIELDS[platform]) {
    const fieldValue = (value as Record<string, unknown>)[field];
    if (fieldValue === undefined || fieldValue === null) continue;
    if (typeof fieldValue !== 'string') {
      throw new HeraldError('INVALID_METADATA', `Metadata field ${field} must be a string, got ${typeof fieldValue}`);
    }
    if (fieldValue.length > MAX_METADATA_VALUE_LENGTH) {
      throw new HeraldError('INVALID_METADATA', `Metadata field ${field} is longer than ${MAX_METADATA_VALUE_LENGTH} characters`);
    }
    metadata[field] = fieldValue;
  }
  return metadata;
}

/** One interest name from a path or a body; 400 INVALID_INTEREST_NAME saying which. */
export function requireInterestName(name: unknown): string {
  if (!isValidInterestName(name)) {
    throw new HeraldError(
      'INVALID_INTEREST_NAME',
      `Interest name ${quote(name)} is not valid: it must have 1 to 164 characters of A-Z a-z 0-9 _ - = @ , . ;`,
    );
  }
  return name;
}

/** The `interests` field of D13: an array of valid names, at most 5000 distinct; returned de-duplicated and sorted. */
export function parseInterestSet(body: Record<string, unknown>): string[] {
  const interests = body['interests'];
  if (!Array.isArray(interests)) {
    throw new HeraldError('DEVICE_FIELD_INVALID', '`interests` must be an array of interest names');
  }
  const distinct = new Set<string>();
  for (const name of interests) distinct.add(requireInterestName(name));
  if (distinct.size > MAX_INTERESTS_PER_DEVICE) {
    throw new HeraldError('TOO_MANY_INTERESTS', `The set has ${distinct.size} interests; a device may have at most ${MAX_INTERESTS_PER_DEVICE}`);
  }
  return [...distinct].sort();
}

/** D12's `limit` query parameter: an integer from 1 to 100, default 100. */
export function parseInterestLimit(raw: string | null): number {
  if (raw === null) return MAX_INTEREST_PAGE;
  if (!/^[0-9]{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_INTEREST_PAGE) {
    throw new HeraldError('INVALID_LIMIT', `limit must be an integer from 1 to ${MAX_INTEREST_PAGE}, got ${quote(raw)}`);
  }
  return Number(raw);
}
