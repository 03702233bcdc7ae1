import { describe, expect, it } from 'vitest';
import { configWithTenants, tenantMapsOf } from '../../../src/shards/tenant-lists.js';
import { configSchema, type AppConfig, type HeraldConfig } from '../../../src/config/schema.js';

const app = (id: string) => ({ id, key: `${id}-key`, secret: 's' }) as AppConfig;

describe('configWithTenants', () => {
  it('lists the maps as they are when first read, keeps the other settings, and never reads the lists of the config it replaces', () => {
    const base = configSchema.parse({ apps: [app('a')], push: [], logLevel: 'warn' }) as HeraldConfig;
    const maps = tenantMapsOf(base);
    let config: Readonly<HeraldConfig> = base;
    // A chain of changes as the admin API makes them: each makes a config around the same maps.
    for (let i = 0; i < 5000; i++) {
      maps.apps.set(`n-${i}`, app(`n-${i}`));
      config = configWithTenants(config, maps);
    }
    maps.apps.delete('a');
    expect(config.logLevel).toBe('warn');
    expect(config.apps.map((a) => a.id)).toEqual(Array.from({ length: 5000 }, (_, i) => `n-${i}`));
    // Read once, kept: the next change makes a new config.
    expect(config.apps).toBe(config.apps);
    expect(config.push).toEqual([]);
    expect(Object.isFrozen(config)).toBe(true);
    // What a restarted shard is given: plain lists.
    expect(structuredClone(config).apps).toHaveLength(5000);
  });
});
