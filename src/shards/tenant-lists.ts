/**
 * The running config's `apps` and `push` as views of the maps that hold them, on both sides of
 * the shard boundary (the tenant registry on the main thread, the shard runtime in a worker).
 * A change of one tenant sets or deletes one map entry and makes a new config object around the
 * same maps, so it costs the same with 10 apps or 20,000: the lists are built only when a
 * reader asks for them (a reload's comparison, a restarted shard's start-up data), once per
 * change at most.
 */
import type { AppConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';

/** Apps by id and push instances by id, in the order their lists have. */
export interface TenantMaps {
  readonly apps: ReadonlyMap<string, AppConfig>;
  readonly push: ReadonlyMap<string, PushInstanceConfig>;
}

/**
 * `config` with `apps` and `push` read from `maps` when first asked for, then kept (the next
 * change makes a new config). The other settings are copied without reading `config`'s own
 * `apps` and `push`, which may be views themselves.
 */
export function configWithTenants(config: Readonly<HeraldConfig>, maps: TenantMaps): Readonly<HeraldConfig> {
  const settings: Record<string, unknown> = {};
  for (const key of Object.keys(config)) if (key !== 'apps' && key !== 'push') settings[key] = config[key as keyof HeraldConfig];
  let apps: AppConfig[] | undefined;
  let push: PushInstanceConfig[] | undefined;
  return Object.freeze(
    Object.defineProperties(settings, {
      apps: { enumerable: true, get: () => (apps ??= [...maps.apps.values()]) },
      push: { enumerable: true, get: () => (push ??= [...maps.push.values()]) },
    }) as HeraldConfig,
  );
}

/** The maps of a config's lists (start-up, reload). */
export function tenantMapsOf(config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>): { apps: Map<string, AppConfig>; push: Map<string, PushInstanceConfig> } {
  return { apps: new Map(config.apps.map((a) => [a.id, a])), push: new Map(config.push.map((p) => [p.instanceId, p])) };
}
