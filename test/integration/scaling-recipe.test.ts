/**
 * docs/scaling.md "Two nodes in five minutes", run as written: its config file (with the test's
 * private Redis and PostgreSQL in place of 127.0.0.1:6379 and :5432), its SQL, and its two node
 * command lines (with free ports and temporary data dirs in place of theirs). A client on node A
 * receives an event triggered through node B; a device registered through A is known through B;
 * a node started on another node's data dir stops naming the setting, as the page says.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeraldProcess, REPO_ROOT } from '../helpers/herald-process.js';
import { PostgresServer } from '../helpers/postgres-server.js';
import { RedisServer } from '../helpers/redis-server.js';
import { channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const PAGE = readFileSync(join(REPO_ROOT, 'docs/scaling.md'), 'utf8');

/** The fenced block right after `<!-- scaling-recipe:<name> -->`. */
function block(name: string): string {
  const m = new RegExp(`<!-- scaling-recipe:${name} -->\\s*\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(PAGE);
  if (!m) throw new Error(`docs/scaling.md has no scaling-recipe:${name} block`);
  return m[1]!;
}

interface RecipeConfig {
  apps: { id: string; key: string; secret: string }[];
  push: { instanceId: string; secretKey: string }[];
  cluster: { redisUrl: string; postgresUrl: string };
}

/** `HERALD_PORT=6001 HERALD_DATA_DIR=/var/lib/herald-a npx herald --config herald.json` → its variables. */
function nodeLines(): Record<string, string>[] {
  return block('nodes')
    .trim()
    .split('\n')
    .map((line) => {
      expect(line).toMatch(/ herald --config herald\.json$/);
      return Object.fromEntries([...line.matchAll(/\b(HERALD_[A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    });
}

const recipe = JSON.parse(block('config')) as RecipeConfig;
const redis = new RedisServer();
const postgres = new PostgresServer();
const scratch = mkdtempSync(join(tmpdir(), 'herald-recipe-'));
const nodes: HeraldProcess[] = [];
let client: PusherJsClient | undefined;

beforeAll(async () => {
  await Promise.all([redis.start(), postgres.start()]);
  // Step 2's SQL, as its psql -c arguments give it.
  const sql = [...PAGE.matchAll(/psql((?: -c "[^"]+")+)/g)].flatMap((m) => [...m[1]!.matchAll(/-c "([^"]+)"/g)].map((c) => c[1]!));
  expect(sql.length).toBeGreaterThan(0);
  const admin = new pg.Client({ connectionString: postgres.url() });
  await admin.connect();
  try {
    for (const statement of sql) await admin.query(statement);
  } finally {
    await admin.end();
  }
});

afterAll(async () => {
  client?.disconnect();
  await Promise.allSettled(nodes.map((node) => node.dispose()));
  await Promise.allSettled([redis.stop(), postgres.dispose()]);
  rmSync(scratch, { recursive: true, force: true });
});

/** The recipe's config with the private servers' ports in place of the documented ones. */
function configForTest(): RecipeConfig {
  const redisUrl = new URL(recipe.cluster.redisUrl);
  redisUrl.port = String(redis.port);
  const postgresUrl = new URL(recipe.cluster.postgresUrl);
  postgresUrl.port = String(postgres.port);
  return { ...recipe, cluster: { ...recipe.cluster, redisUrl: redisUrl.toString(), postgresUrl: postgresUrl.toString() } };
}

function node(dataDir: string): HeraldProcess {
  const started = new HeraldProcess({ config: configForTest() as unknown as Record<string, unknown>, bare: true, dataDir, shards: 1 });
  nodes.push(started);
  return started;
}

describe('docs/scaling.md: two nodes in five minutes', () => {
  it('gives each node its own port and data dir', () => {
    const lines = nodeLines();
    expect(lines).toHaveLength(2);
    expect(new Set(lines.map((l) => l.HERALD_PORT)).size).toBe(2);
    expect(new Set(lines.map((l) => l.HERALD_DATA_DIR)).size).toBe(2);
  });

  it('runs: a subscriber on node A receives what node B publishes; a device registered on A is known on B; a shared data dir is refused', async () => {
    const [lineA, lineB] = nodeLines();
    const dirA = join(scratch, lineA!.HERALD_DATA_DIR!.split('/').pop()!);
    const dirB = join(scratch, lineB!.HERALD_DATA_DIR!.split('/').pop()!);
    mkdirSync(dirA);
    mkdirSync(dirB);
    const a = await node(dirA).start();
    const b = await node(dirB).start();

    const app = recipe.apps[0]!;
    const received: unknown[] = [];
    client = pusherJsClient(a.port, app.key);
    const channel = client.subscribe('orders');
    channel.bind('created', (data: unknown) => received.push(data));
    await until(() => channel.subscribed, 'subscribed through node A');
    await channelsSdk(b.port, app).trigger('orders', 'created', { id: 1 });
    await until(() => received.length === 1, 'the event triggered through node B');
    expect(received).toEqual([{ id: 1 }]);

    const instance = recipe.push[0]!;
    const devices = (port: number) => `http://127.0.0.1:${port}/device_api/v1/instances/${instance.instanceId}/devices/fcm`;
    const registered = await fetch(devices(a.port), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: 'recipe-token' }) });
    expect(registered.status).toBe(200);
    const { id } = (await registered.json()) as { id: string };
    expect((await fetch(`${devices(b.port)}/${encodeURIComponent(id)}`)).status).toBe(200);

    const third = node(dirA);
    const refused = await third.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused, 'a node on a data dir in use must not start').toBeInstanceOf(Error);
    expect(third.stderr).toContain(`data dir ${dirA} is in use`);
    expect(third.stderr).toContain('dataDir');
    expect(third.stderr).toContain('HERALD_DATA_DIR');
  });
});
