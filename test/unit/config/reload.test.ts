import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { planReload } from '../../../src/config/reload.js';

const app = { id: 'a', key: 'k', secret: 's' };

describe('planReload', () => {
  it('applies apps, push and logLevel, keeps restart-only settings and names them', () => {
    // maxConnections fixed: its default follows the shard count (and would be reported too).
    const running = parseConfig({ shards: 2, port: 6001, maxConnections: 1000, apps: [app] });
    const next = parseConfig({ shards: 4, port: 7000, maxConnections: 1000, apps: [{ ...app, secret: 't' }], logLevel: 'debug', webhookDelivery: { batchWindowMs: 1 } });
    const plan = planReload(running, next);
    expect(plan.changed).toEqual(['apps', 'logLevel']);
    expect(plan.restartNeeded).toEqual(['port', 'shards', 'webhookDelivery']);
    expect(plan.effective.apps[0]!.secret).toBe('t');
    expect(plan.effective.logLevel).toBe('debug');
    expect(plan.effective.port).toBe(6001);
    expect(plan.effective.shards).toBe(2);
    expect(plan.effective.webhookDelivery.batchWindowMs).toBe(50);
  });

  it('treats turning TLS on or off as restart-only', () => {
    const running = parseConfig({ shards: 1 });
    const withTls = { ...running, tls: { certFile: '/c.pem', keyFile: '/k.pem' } };
    const plan = planReload(running, withTls);
    expect(plan.restartNeeded).toEqual(['tls']);
    expect(plan.changed).toEqual([]);
    expect(plan.effective.tls).toBeNull();
  });

  it('does not take push instances live in a cluster without cluster.postgresUrl', () => {
    const instance = { instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'push-secret' };
    const running = parseConfig({ shards: 1, push: [], cluster: { redisUrl: 'redis://127.0.0.1:6390' } });
    const plan = planReload(running, parseConfig({ shards: 1, push: [instance], cluster: { redisUrl: 'redis://127.0.0.1:6390' } }));
    expect(plan).toMatchObject({ changed: [], restartNeeded: ['push'] });
    expect(plan.effective.push).toEqual([]);
    const shared = parseConfig({ shards: 1, push: [], cluster: { redisUrl: 'redis://127.0.0.1:6390', postgresUrl: 'postgres://h/db' } });
    const live = planReload(shared, parseConfig({ shards: 1, push: [instance], cluster: { redisUrl: 'redis://127.0.0.1:6390', postgresUrl: 'postgres://h/db' } }));
    expect(live.changed).toEqual(['push']);
    expect(live.effective.push).toHaveLength(1);
  });

  it('reports nothing for an unchanged file', () => {
    const running = parseConfig({ shards: 1, apps: [app] });
    const plan = planReload(running, parseConfig({ shards: 1, apps: [app] }));
    expect(plan).toMatchObject({ changed: [], restartNeeded: [] });
  });

  it('names only the apps and push instances that changed, and keeps the running object of every other one', () => {
    const apps = Array.from({ length: 1000 }, (_, i) => ({ id: `app-${i}`, key: `key-${i}`, secret: `secret-${i}` }));
    const running = parseConfig({ shards: 1, apps });
    const next = parseConfig({ shards: 1, apps: [...apps.slice(0, 500).map((a, i) => (i === 7 ? { ...a, maxConnections: 5 } : a)), ...apps.slice(501), { id: 'new', key: 'new-key', secret: 'n' }] });
    const plan = planReload(running, next);
    expect(plan.changed).toEqual(['apps']);
    expect(plan.tenants).toEqual({ apps: [next.apps[7], next.apps.at(-1)], removedApps: ['app-500'], push: [], removedPush: [] });
    const runningById = new Map(running.apps.map((a) => [a.id, a]));
    const reused = plan.effective.apps.filter((a) => runningById.get(a.id) === a);
    expect(reused).toHaveLength(998);
    expect(plan.effective.apps.find((a) => a.id === 'app-7')!.maxConnections).toBe(5);
  });
});
