/**
 * A secret rotated through the admin API with a grace period: the running app (push instance)
 * carries the previous secret and when it stops being accepted (src/tenants). Signature checks
 * try the current secret first and the previous one only while its grace lasts.
 */

/** Fields a running app or push instance may carry besides its config. */
export interface SecretGrace {
  readonly previousSecret?: string;
  /** Epoch ms. */
  readonly previousUntilMs?: number;
}

/** The previous secret of `entry` while its grace period lasts, else undefined. */
export function graceSecret(entry: object, nowMs = Date.now()): string | undefined {
  const grace = entry as SecretGrace;
  return grace.previousSecret !== undefined && (grace.previousUntilMs ?? 0) > nowMs ? grace.previousSecret : undefined;
}
