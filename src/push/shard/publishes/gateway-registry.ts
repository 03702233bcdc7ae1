/**
 * The gateway clients of one shard: built lazily per instance and platform from the config the
 * first time a publish needs them, kept for every later publish (connection pools, cached
 * provider and access tokens), and closed once on shutdown.
 */
import type { PushDeliveryConfig, PushInstanceConfig } from '../../../config/schema.js';
import { log } from '../../../log.js';
import { closeGatewayClients, createGatewayClients, type GatewayFactoryOptions } from '../../gateways/factory.js';
import type { GatewayClient } from '../../gateways/gateway.js';
import type { Platform } from '../../platform.js';
import { instanceOfNamespace } from '../../store/namespaces.js';

/** Why a platform of an instance has no client. */
export type MissingGateway = 'not-configured' | 'unusable-config' | 'closed';

/** Lazily built, long-lived gateway clients of one shard, per instance and platform. */
export class GatewayRegistry {
  private instances: ReadonlyMap<string, PushInstanceConfig>;
  private readonly options: GatewayFactoryOptions;
  private readonly clients = new Map<string, GatewayClient | MissingGateway>();
  /** Clients replaced by a reload, closed once their sends can have settled (or on close()). */
  private readonly retired = new Set<GatewayClient>();
  private closed = false;

  /**
   * `isCurrent`: whether a namespace (push/store/namespaces.ts) is its instance's current one;
   * a retired namespace (a deleted instance's publish) gets no client, whatever the instance
   * of that id now configures.
   */
  constructor(
    instances: readonly PushInstanceConfig[],
    delivery: Readonly<PushDeliveryConfig>,
    allowPrivateAddresses: readonly string[] = [],
    private readonly isCurrent: (namespace: string) => boolean = () => true,
  ) {
    this.instances = new Map(instances.map((instance) => [instance.instanceId, instance]));
    this.options = {
      retry: {
        attempts: delivery.retryAttempts,
        baseDelayMs: delivery.retryBaseDelayMs,
        maxDelayMs: Math.max(delivery.retryMaxDelayMs, delivery.retryBaseDelayMs),
        maxPauseMs: delivery.retryMaxPauseMs,
      },
      requestTimeoutMs: delivery.requestTimeoutMs,
      poolSize: delivery.connectionsPerGateway,
      allowPrivateAddresses,
    };
  }

  /** The client for an instance's platform (`namespace`: the instance's namespace), or why there is none. */
  client(namespace: string, platform: Platform): GatewayClient | MissingGateway {
    if (this.closed) return 'closed';
    if (!this.isCurrent(namespace)) return 'not-configured';
    const instanceId = instanceOfNamespace(namespace);
    const key = `${instanceId}\u0000${platform}`;
    let client = this.clients.get(key);
    if (client === undefined) {
      client = this.build(instanceId, platform);
      this.clients.set(key, client);
    }
    return client;
  }

  /**
   * Takes a reloaded instance list (SIGHUP): the clients of an instance whose credentials or
   * endpoints changed, or that is gone, are dropped (closed once their sends settle) and built
   * again from the new config when next needed.
   */
  reload(instances: readonly PushInstanceConfig[]): void {
    const next = new Map(instances.map((instance) => [instance.instanceId, instance]));
    const stale: Partial<Record<Platform, GatewayClient>>[] = [];
    for (const [key, client] of this.clients) {
      const [instanceId, platform] = key.split('\u0000') as [string, Platform];
      const before = this.instances.get(instanceId)?.[platform];
      const after = next.get(instanceId)?.[platform];
      if (JSON.stringify(before ?? null) === JSON.stringify(after ?? null)) continue;
      this.clients.delete(key);
      if (typeof client !== 'string') stale.push({ [client.platform]: client });
    }
    this.instances = next;
    if (stale.length === 0) return;
    // Sends in flight on a replaced client finish on it: closing now would cut them.
    const retired = stale.map((clients) => Object.values(clients)[0]!);
    for (const client of retired) this.retired.add(client);
    const retry = this.options.retry ?? {};
    const graceMs = (this.options.requestTimeoutMs ?? 10_000) * (retry.attempts ?? 3) + (retry.maxPauseMs ?? 60_000) + 1000;
    setTimeout(() => {
      for (const client of retired) {
        if (!this.retired.delete(client)) continue;
        closeGatewayClients({ [client.platform]: client }).catch((err: unknown) => log.warn('closing a replaced gateway client failed', { error: String(err) }));
      }
    }, graceMs).unref();
  }

  /** Closes every client; sends still waiting on a retry resolve as failed (CLOSED_OUTCOME). */
  async close(): Promise<void> {
    this.closed = true;
    const open: Partial<Record<Platform, GatewayClient>>[] = [];
    for (const client of this.clients.values()) {
      if (typeof client !== 'string') open.push({ [client.platform]: client });
    }
    this.clients.clear();
    for (const client of this.retired) open.push({ [client.platform]: client });
    this.retired.clear();
    await Promise.all(open.map((clients) => closeGatewayClients(clients)));
  }

  private build(instanceId: string, platform: Platform): GatewayClient | MissingGateway {
    const config = this.instances.get(instanceId)?.[platform];
    if (!config) return 'not-configured';
    try {
      const client = createGatewayClients({ [platform]: config }, this.options)[platform];
      return client ?? 'not-configured';
    } catch (err) {
      // A key that does not parse: every send of this platform fails until the config is fixed.
      log.error('gateway client cannot be built from the config', { instanceId, platform, error: (err as Error).message });
      return 'unusable-config';
    }
  }
}
