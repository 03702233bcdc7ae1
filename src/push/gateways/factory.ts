/**
 * Builds the gateway clients of one Beams instance from its config; called once per instance
 * in each shard worker, never per publish.
 */
import { ApnsClient } from './apns.js';
import { FcmClient } from './fcm.js';
import type { ApnsConfig, FcmConfig, GatewayClient, RetryPolicy, WebPushConfig } from './gateway.js';
import type { Platform } from '../platform.js';
import { WebPushClient } from './web.js';

/** The gateway part of an instance's config: a platform is enabled when its section is present and not null. */
export interface GatewayInstanceConfig {
  apns?: Readonly<ApnsConfig> | null | undefined;
  fcm?: Readonly<FcmConfig> | null | undefined;
  web?: Readonly<WebPushConfig> | null | undefined;
}

/** Settings shared by every client built here. */
export interface GatewayFactoryOptions {
  /** Retry policy for all three platforms; unset fields take the defaults (3 attempts, 200 ms, 10 s backoff, 60 s pause). */
  retry?: Partial<RetryPolicy>;
  /** Deadline per gateway request in ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** HTTP/2 sessions per APNs/FCM client. Default 2. */
  poolSize?: number;
  /** Private addresses and CIDR ranges web push services may be on (`outbound.allowPrivateAddresses`). */
  allowPrivateAddresses?: readonly string[];
}

/** One client per configured platform; platforms without config are absent from the result. */
export function createGatewayClients(
  instanceConfig: GatewayInstanceConfig,
  options: GatewayFactoryOptions = {},
): Partial<Record<Platform, GatewayClient>> {
  const clients: Partial<Record<Platform, GatewayClient>> = {};
  const shared = {
    ...(options.retry ? { retry: options.retry } : {}),
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
  };
  const pool = options.poolSize !== undefined ? { poolSize: options.poolSize } : {};
  if (instanceConfig.apns) clients.apns = new ApnsClient(instanceConfig.apns, { ...shared, ...pool });
  if (instanceConfig.fcm) clients.fcm = new FcmClient(instanceConfig.fcm, { ...shared, ...pool });
  const outbound = options.allowPrivateAddresses ? { allowPrivateAddresses: options.allowPrivateAddresses } : {};
  if (instanceConfig.web) clients.web = new WebPushClient(instanceConfig.web, { ...shared, ...outbound });
  return clients;
}

/** Closes every client built by createGatewayClients (when an instance is removed or the shard stops). */
export async function closeGatewayClients(clients: Partial<Record<Platform, GatewayClient>>): Promise<void> {
  await Promise.all(Object.values(clients).map((client) => client.close()));
}
