/**
 * Validation of an R1/R2 report body, on the main thread. Each
 * missing required field is its own 400 REPORT_FIELD_MISSING naming the field; a field of the
 * wrong type is 400 REPORT_FIELD_INVALID naming it. JSON `null` counts as absent. Unknown
 * fields are ignored, and so are the delivery-only flags on an open report.
 */
import { HeraldError } from '../../../errors.js';
import { quote } from '../common.js';
import { isEncodableKeyPart } from '../../keys.js';
import type { DeliveryReport, ReportKind } from '../../messages/reports.js';

/** Longest publishId, deviceId or userId accepted (characters); Herald's own ids are far shorter. */
export const MAX_REPORT_ID_LENGTH = 512;

const REQUIRED = ['event', 'publishId', 'deviceId', 'timestampSecs'] as const;
const DELIVERY_FLAGS = ['appInBackground', 'hasDisplayableContent', 'hasData'] as const;

/** The report kind named by `event`, in any letter case (`delivery`, `Delivery`, `OPEN`, …); undefined otherwise. */
export function reportKindOf(event: string): ReportKind | undefined {
  const lower = event.toLowerCase();
  return lower === 'delivery' || lower === 'open' ? lower : undefined;
}

function invalid(field: string, rule: string, value: unknown): HeraldError {
  const shown = typeof value === 'string' ? quote(value) : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : String(value);
  return new HeraldError('REPORT_FIELD_INVALID', `Field ${field} ${rule}, got ${shown}`);
}

/** A non-empty id string that can be stored as a key part. */
function idField(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value.length === 0) throw invalid(field, 'must be a non-empty string', value);
  if (value.length > MAX_REPORT_ID_LENGTH) {
    throw new HeraldError('REPORT_FIELD_INVALID', `Field ${field} must have at most ${MAX_REPORT_ID_LENGTH} characters, got ${value.length}`);
  }
  if (!isEncodableKeyPart(value)) throw new HeraldError('REPORT_FIELD_INVALID', `Field ${field} must be valid Unicode text`);
  return value;
}

/** Checks a parsed JSON object as a report of `instanceId`; throws a HeraldError naming the first bad field. */
export function parseReport(instanceId: string, body: Record<string, unknown>): DeliveryReport {
  for (const field of REQUIRED) {
    if (body[field] === undefined || body[field] === null) {
      throw new HeraldError('REPORT_FIELD_MISSING', `Missing required field ${field}`);
    }
  }
  const event = body.event;
  const kind = typeof event === 'string' ? reportKindOf(event) : undefined;
  if (kind === undefined) throw invalid('event', 'must be "delivery" or "open"', event);
  const publishId = idField(body, 'publishId');
  const deviceId = idField(body, 'deviceId');
  const rawTimestamp = body.timestampSecs;
  // Some web SDK versions send Date.now() / 1000: a fraction of a second is dropped, not refused.
  if (typeof rawTimestamp !== 'number' || !Number.isFinite(rawTimestamp) || rawTimestamp < 0) {
    throw invalid('timestampSecs', 'must be a non-negative number (Unix seconds)', rawTimestamp);
  }
  const timestampSecs = Math.floor(rawTimestamp);

  const report: DeliveryReport = { instanceId, publishId, deviceId, kind, timestampSecs };
  if (body.userId !== undefined && body.userId !== null) report.userId = idField(body, 'userId');
  for (const flag of DELIVERY_FLAGS) {
    const value = body[flag];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'boolean') throw invalid(flag, 'must be a boolean', value);
    if (kind === 'delivery') report[flag] = value;
  }
  return report;
}
