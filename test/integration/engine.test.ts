import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, HeraldProcess, REPO_ROOT, startHerald } from '../helpers/herald-process.js';

describe('engine: start-up, routes, shutdown', () => {
  let herald: HeraldProcess;
  beforeAll(async () => {
    herald = await startHerald();
  });
  afterAll(() => herald.dispose());

  it('prints the URL and the development credentials with a warning', () => {
    expect(herald.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
    expect(herald.stdout).toContain('WARNING');
    expect(herald.stdout).toContain('key=app-key');
    expect(herald.stdout).toContain('8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10');
  });

  it('answers /ready and /health with every shard', async () => {
    const ready = await fetch(`${herald.baseUrl}/ready`);
    expect(ready.status).toBe(200);
    const health = await fetch(`${herald.baseUrl}/health`);
    expect(health.status).toBe(200);
    const body = (await health.json()) as { shards: { shard: number }[] };
    expect(body.shards.map((s) => s.shard)).toEqual([0, 1]);
  });

  it('answers unknown routes with 404 and a JSON body', async () => {
    const res = await fetch(`${herald.baseUrl}/no/such/route`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toMatchObject({ code: 'ROUTE_NOT_FOUND' });
  });

  it('writes the data dir identity with the shard count', () => {
    const identity = JSON.parse(readFileSync(join(herald.dataDir, 'herald.json'), 'utf8')) as { shards: number; installSecret: string };
    expect(identity.shards).toBe(2);
    expect(identity.installSecret).toMatch(/^[0-9a-f]{64}$/);
  });

  it('shuts down on SIGTERM with exit code 0 and restarts on the same data', async () => {
    const code = await herald.stop('SIGTERM');
    expect(code).toBe(0);
    await herald.restart();
    expect((await fetch(`${herald.baseUrl}/ready`)).status).toBe(200);
  });
});

describe('engine: configuration errors fail fast', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function run(args: string[], env: Record<string, string> = {}) {
    return spawnSync(process.execPath, [CLI, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, HERALD_DATA_DIR: join(dir, 'data'), HERALD_PORT: '0', ...env },
      encoding: 'utf8',
      timeout: 20_000,
    });
  }

  it('names the path of a bad field', () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify({ apps: [{ id: 'a', key: 'k', secret: 's', maxConnections: 'many' }] }));
    const r = run(['--config', file]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('apps.0.maxConnections');
  });

  it('rejects unknown fields and unreadable files', () => {
    const file = join(dir, 'unknown.json');
    writeFileSync(file, JSON.stringify({ prot: 1 }));
    expect(run(['--config', file]).stderr).toMatch(/invalid config/);
    expect(run(['--config', join(dir, 'missing.json')]).stderr).toMatch(/cannot read config file/);
  });

  it('rejects a bad HERALD_PORT', () => {
    const r = run([], { HERALD_PORT: 'eighty' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('HERALD_PORT');
  });

  it('refuses a data dir written with another shard count', async () => {
    const dataDir = join(dir, 'shards');
    const first = await startHerald({ dataDir, shards: 2 });
    await first.stop();
    const r = run([], { HERALD_DATA_DIR: dataDir, HERALD_SHARDS: '3' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('created with 2 shards');
  });
});
