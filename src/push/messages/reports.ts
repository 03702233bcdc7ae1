/** Main ↔ shard messages of push reporting (type-only). */

/** What a report says happened: R1 `delivery` (the device received it) or R2 `open` (the user tapped it). */
export type ReportKind = 'delivery' | 'open';

/** One validated R1/R2 report, as the main thread hands it to the device's shard. */
export interface DeliveryReport {
  instanceId: string;
  publishId: string;
  deviceId: string;
  kind: ReportKind;
  /** When the SDK says it happened, Unix seconds. */
  timestampSecs: number;
  /** The user the SDK reports for; a webhook names it only when the device belongs to that user. */
  userId?: string;
  /** Delivery only: the app was in the background. */
  appInBackground?: boolean;
  /** Delivery only: the notification had a visible part. */
  hasDisplayableContent?: boolean;
  /** Delivery only: the notification had a data payload. */
  hasData?: boolean;
}

/**
 * What the shard did with a report: `recorded` (first report of this kind for this publish and
 * device, counted), `duplicate` (already counted, nothing changed), `unknown-device` or
 * `unknown-publish` (the device's shard has no such device, or no such publish, in the
 * instance: ignored, see docs/push-api.md "Reporting API").
 */
export type ReportOutcome = 'recorded' | 'duplicate' | 'unknown-device' | 'unknown-publish';

/** Reports counted for one publish on one shard: each (device, kind) once. */
export interface ReportCounts {
  delivered: number;
  opened: number;
}

export interface ReportShardApi {
  /** Records a report durably on the shard owning `deviceId` (deviceShardFor); resolves after the commit. */
  'report.record': { req: { report: DeliveryReport }; res: { outcome: ReportOutcome } };
  /** This shard's counts for one publish (zeros when it has none); the stats endpoint sums every shard's. */
  'report.counts': { req: { instanceId: string; publishId: string }; res: ReportCounts };
}
