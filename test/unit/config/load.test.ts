import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, parseConfig } from '../../../src/config/load.js';
import { DEFAULT_ADMIN_TOKEN } from '../../../src/config/schema.js';

describe('config', () => {
  it('has schema defaults: port 6001, every address, ./data, no app and no push instance', () => {
    const c = parseConfig({});
    expect(c.port).toBe(6001);
    expect(c.host).toBe('0.0.0.0');
    expect(c.dataDir).toBe('./data');
    expect(c.shards).toBeGreaterThanOrEqual(1);
    expect(c.apps).toEqual([]);
    expect(c.push).toEqual([]);
    expect(c.admin.token).toBeNull();
  });

  it('without a config file: the development app (client events and sign-in on), push instance and admin token, on loopback', () => {
    const c = loadConfig({ env: {} });
    expect(c.host).toBe('127.0.0.1');
    expect(c.apps).toHaveLength(1);
    expect(c.apps[0]).toMatchObject({ id: 'app-id', key: 'app-key', secret: 'app-secret', enabled: true, clientEvents: true, userAuthentication: true });
    expect(c.push).toHaveLength(1);
    expect(c.push[0]).toMatchObject({ instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'push-secret', maxPublishesPerSecond: 100 });
    expect(c.admin.token).toBe(DEFAULT_ADMIN_TOKEN);
    // The public development credentials stay on loopback unless the operator says otherwise.
    expect(() => loadConfig({ env: { HERALD_HOST: '0.0.0.0' } })).toThrow(/will not serve them on 0\.0\.0\.0.*HERALD_EXPOSE_DEVELOPMENT_DEFAULTS=1/);
    expect(() => loadConfig({ env: { HERALD_HOST: '10.1.2.3', HERALD_EXPOSE_DEVELOPMENT_DEFAULTS: 'yes' } })).toThrow(ConfigError);
    expect(loadConfig({ env: { HERALD_HOST: '0.0.0.0', HERALD_EXPOSE_DEVELOPMENT_DEFAULTS: '1' } }).host).toBe('0.0.0.0');
    expect(loadConfig({ env: { HERALD_HOST: '127.0.0.2' } }).host).toBe('127.0.0.2');
  });

  it('a config file means what it says: {} is an empty server, with no development credentials', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
    try {
      const file = join(dir, 'c.json');
      writeFileSync(file, '{}');
      const empty = loadConfig({ configPath: file, env: {} });
      expect(empty).toMatchObject({ apps: [], push: [], host: '0.0.0.0', admin: { token: null } });
      writeFileSync(file, JSON.stringify({ apps: [{ id: 'a', key: 'k', secret: 's' }] }));
      expect(loadConfig({ configPath: file, env: {} }).push).toEqual([]);
      expect(loadConfig({ env: { HERALD_CONFIG: file } }).apps.map((a) => a.id)).toEqual(['a']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is frozen all the way down', () => {
    const c = loadConfig({ env: {} });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.apps[0])).toBe(true);
    expect(() => {
      (c.apps as unknown as unknown[]).push({});
    }).toThrow();
  });

  it('environment overrides the file values', () => {
    const c = loadConfig({ env: { HERALD_PORT: '7001', HERALD_HOST: '127.0.0.1', HERALD_DATA_DIR: '/tmp/x', HERALD_SHARDS: '3' } });
    expect(c).toMatchObject({ port: 7001, host: '127.0.0.1', dataDir: '/tmp/x', shards: 3 });
  });

  it('fails with the path of the bad field', () => {
    expect(() => parseConfig({ push: [{ instanceId: 'not-a-uuid', secretKey: 's' }] })).toThrow(/push\.0\.instanceId/);
    expect(() => parseConfig({ apps: [{ id: 'a', key: 'k', secret: 's', webhooks: [{ url: 'x' }] }] })).toThrow(/apps\.0\.webhooks\.0\.url/);
    expect(() => parseConfig({ port: 70000 })).toThrow(ConfigError);
  });

  it('accepts and ignores the deprecated channelAdapter "local", and refuses any other value', () => {
    const c = parseConfig({ channelAdapter: 'local' });
    expect(c.channelAdapter).toBeUndefined();
    expect(() => parseConfig({ channelAdapter: 'redis' })).toThrow(/channelAdapter/);
  });

  it('reads the deprecated webhookDelivery.reloadDebounceMs as pageReloadDebounceMs, and refuses both at once', () => {
    expect(parseConfig({ webhookDelivery: { reloadDebounceMs: 250 } }).webhookDelivery.pageReloadDebounceMs).toBe(250);
    expect(parseConfig({ webhookDelivery: { pageReloadDebounceMs: 400 } }).webhookDelivery.pageReloadDebounceMs).toBe(400);
    expect(parseConfig({}).webhookDelivery.pageReloadDebounceMs).toBe(3000);
    expect(() => parseConfig({ webhookDelivery: { reloadDebounceMs: 1, pageReloadDebounceMs: 2 } })).toThrow(/webhookDelivery\.reloadDebounceMs: deprecated name of pageReloadDebounceMs/);
  });

  it('rejects duplicate app keys', () => {
    const app = { id: 'a', key: 'k', secret: 's' };
    expect(() => parseConfig({ apps: [app, { ...app, id: 'b' }] })).toThrow(/apps\.1\.key: duplicate/);
  });

  it('turns the admin API on with the development token only for the embedded defaults', () => {
    expect(parseConfig({}).admin.token).toBeNull();
    expect(loadConfig({ env: {} }).admin.token).toBe(DEFAULT_ADMIN_TOKEN);
    expect(loadConfig({ env: { HERALD_ADMIN_TOKEN: 'a-token-of-16-chars-or-more' } }).admin.token).toBe('a-token-of-16-chars-or-more');
    expect(loadConfig({ env: { HERALD_ADMIN_TOKEN: '' } }).admin.token).toBeNull();
    expect(() => loadConfig({ env: { HERALD_ADMIN_TOKEN: 'short' } })).toThrow(/admin\.token/);
    const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
    try {
      const file = join(dir, 'c.json');
      writeFileSync(file, JSON.stringify({ port: 7002 }));
      expect(loadConfig({ configPath: file, env: {} }).admin.token).toBeNull();
      writeFileSync(file, JSON.stringify({ admin: { token: 'from-the-file-0123456789' } }));
      expect(loadConfig({ configPath: file, env: {} }).admin.token).toBe('from-the-file-0123456789');
      expect(loadConfig({ configPath: file, env: { HERALD_ADMIN_TOKEN: 'from-the-env-0123456789' } }).admin.token).toBe('from-the-env-0123456789');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
