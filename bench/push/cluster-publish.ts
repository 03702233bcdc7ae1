/**
 * `--phase cluster` of bench:push: a publish to every device of the dataset (`all`) through the
 * minimal fake gateway, on one node with LMDB (the seeded data dir), then with PostgreSQL on one
 * node and on two nodes (a private PostgreSQL with fsync on and a private redis-server; the
 * devices copied into PostgreSQL in bulk, untimed). Per node: the notifications it sent
 * (herald_push_notifications_total) and its CPU seconds (all threads, from /proc) while the
 * publish ran; the two-node run publishes through the first node and shows both sending.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrate } from '../../src/push/store/postgres/migrations.js';
import { fnv1a32 } from '../../src/shards/hash.js';
import { PostgresServer } from '../../test/helpers/postgres-server.js';
import { RedisServer } from '../../test/helpers/redis-server.js';
import { processCpuUs } from '../proc-stats.js';
import { audienceSize, benchDevice, BENCH_INSTANCE, BENCH_INTERESTS } from './dataset.js';
import type { FakeGatewayProcess } from './fake-gateway-control.js';
import { launchHerald, type RunningHerald } from './herald-launcher.js';
import { epochMs, publish, waitFinished } from './publish-client.js';
import type { SeededDataDir } from './seed.js';

export interface ClusterPublishRow {
  store: 'lmdb' | 'postgres';
  nodes: number;
  members: number;
  /** Publish's 200 → the fake answered every device, ms. */
  handoffMs: number;
  perSecond: number;
  /** Per node, in order (the first accepted the publish). */
  sentPerNode: number[];
  cpuSecondsPerNode: number[];
}

export interface ClusterPublishOptions {
  repoRoot: string;
  data: SeededDataDir;
  gateway: FakeGatewayProcess;
  devices: number;
  shards: number;
  timeoutMs: number;
  log: (line: string) => void;
}

const ALL = BENCH_INTERESTS.find((i) => i.name === 'all')!;
const SMALL = BENCH_INTERESTS.find((i) => i.name === 'small')!;

async function sentBy(node: RunningHerald): Promise<number> {
  const text = await (await fetch(`${node.baseUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('herald_push_notifications_total{') && line.includes('result="sent"')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** Publishes to `all` through the first node; measures sends and CPU per node. */
async function measure(nodes: RunningHerald[], gateway: FakeGatewayProcess, members: number, timeoutMs: number, smallMembers: number): Promise<Omit<ClusterPublishRow, 'store' | 'nodes'>> {
  // Warm-up: sessions, tokens, JIT.
  gateway.reset();
  const warm = await publish(nodes[0]!.baseUrl, [SMALL.name]);
  await gateway.waitFor(smallMembers, 60_000);
  await waitFinished(nodes[0]!.baseUrl, warm.publishId, 60_000);
  const sentBefore = await Promise.all(nodes.map(sentBy));
  const cpuBefore = nodes.map((n) => processCpuUs(n.pid));
  gateway.reset();
  const accepted = await publish(nodes[0]!.baseUrl, [ALL.name]);
  await gateway.waitFor(members, timeoutMs);
  const handoffMs = epochMs() - accepted.acceptedAtMs;
  const cpuSecondsPerNode = nodes.map((n, k) => (processCpuUs(n.pid) - cpuBefore[k]!) / 1e6);
  await waitFinished(nodes[0]!.baseUrl, accepted.publishId, 120_000);
  const sentPerNode = (await Promise.all(nodes.map(sentBy))).map((n, k) => n - sentBefore[k]!);
  return { members, handoffMs, perSecond: (members / handoffMs) * 1000, sentPerNode, cpuSecondsPerNode };
}

/** Copies the dataset's devices (and their `all` and `small` interests) into PostgreSQL. */
async function seedPostgres(url: string, devices: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await migrate(pool);
    const BATCH = 10_000;
    for (let start = 0; start < devices; start += BATCH) {
      const ids: string[] = [];
      const hashes: number[] = [];
      const platforms: string[] = [];
      const tokens: string[] = [];
      const bundles: (string | null)[] = [];
      const interestIds: string[] = [];
      const interestHashes: number[] = [];
      const interests: string[] = [];
      for (let i = start; i < Math.min(devices, start + BATCH); i++) {
        const device = benchDevice(i);
        const id = `bench-${String(i).padStart(8, '0')}`;
        ids.push(id);
        hashes.push(fnv1a32(id));
        platforms.push(device.platform);
        tokens.push(device.token);
        bundles.push(device.platform === 'apns' ? (device.bundleIdentifier ?? null) : null);
        for (const interest of device.interests) {
          if (interest === ALL.name || interest === SMALL.name) {
            interestIds.push(id);
            interestHashes.push(fnv1a32(id));
            interests.push(interest);
          }
        }
      }
      await pool.query(
        `INSERT INTO herald_push_devices (instance_id, device_id, shard_hash, platform, token, bundle_identifier, created_at, interest_count)
         SELECT $1, d.id, d.hash, d.platform, d.token, d.bundle, 0, 0
           FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS d(id, hash, platform, token, bundle)`,
        [BENCH_INSTANCE.instanceId, ids, hashes, platforms, tokens, bundles],
      );
      await pool.query(
        `INSERT INTO herald_push_device_interests (instance_id, device_id, shard_hash, interest, platform, token, bundle_identifier)
         SELECT $1, i.id, i.hash, i.interest, d.platform, d.token, d.bundle_identifier
           FROM unnest($2::text[], $3::bigint[], $4::text[]) AS i(id, hash, interest)
           JOIN herald_push_devices d ON d.instance_id = $1 AND d.device_id = i.id`,
        [BENCH_INSTANCE.instanceId, interestIds, interestHashes, interests],
      );
    }
    await pool.query(
      `UPDATE herald_push_devices d SET interest_count = c.n
         FROM (SELECT device_id, count(*)::int AS n FROM herald_push_device_interests WHERE instance_id = $1 GROUP BY device_id) c
        WHERE d.instance_id = $1 AND d.device_id = c.device_id`,
      [BENCH_INSTANCE.instanceId],
    );
    await pool.query('ANALYZE');
  } finally {
    await pool.end();
  }
}

export async function runClusterPublish(options: ClusterPublishOptions): Promise<ClusterPublishRow[]> {
  const { gateway, log } = options;
  const members = audienceSize(ALL, options.devices);
  const smallMembers = audienceSize(SMALL, options.devices);
  const rows: ClusterPublishRow[] = [];

  log(`cluster publish to ${members.toLocaleString('en')} devices: LMDB, 1 node ...`);
  const unmark = options.data.markInUse();
  const single = await launchHerald({ repoRoot: options.repoRoot, dataDir: options.data.dataDir, shards: options.shards, gateway });
  let clean = false;
  try {
    rows.push({ store: 'lmdb', nodes: 1, ...(await measure([single], gateway, members, options.timeoutMs, smallMembers)) });
    logRow(log, rows.at(-1)!);
    clean = true;
  } finally {
    const code = await single.stop();
    if (clean && code === 0) unmark();
  }

  const postgres = await new PostgresServer({ fsync: true }).start();
  const redis = await new RedisServer().start();
  const dirs: string[] = [];
  try {
    for (const count of [1, 2]) {
      const url = await postgres.createDatabase(`bench_cluster_${count}`);
      log(`cluster publish: PostgreSQL seeded with ${options.devices.toLocaleString('en')} devices; ${count} node(s) ...`);
      await seedPostgres(url, options.devices);
      const nodes: RunningHerald[] = [];
      try {
        for (let k = 0; k < count; k++) {
          const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-cluster-'));
          dirs.push(dataDir);
          nodes.push(await launchHerald({
            repoRoot: options.repoRoot,
            dataDir,
            shards: options.shards,
            gateway,
            config: { cluster: { redisUrl: redis.url, keyPrefix: `bench-${count}:`, nodeId: `bench-node-${k}`, postgresUrl: url } },
          }));
        }
        rows.push({ store: 'postgres', nodes: count, ...(await measure(nodes, gateway, members, options.timeoutMs, smallMembers)) });
        logRow(log, rows.at(-1)!);
      } finally {
        for (const node of nodes) await node.stop();
      }
    }
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await redis.stop();
    await postgres.dispose();
  }
  return rows;
}

function logRow(log: (line: string) => void, row: ClusterPublishRow): void {
  log(`  ${row.store}, ${row.nodes} node(s): ${Math.round(row.perSecond).toLocaleString('en')}/s over ${(row.handoffMs / 1000).toFixed(2)} s; sent per node ${row.sentPerNode.join(' / ')}; CPU s per node ${row.cpuSecondsPerNode.map((c) => c.toFixed(1)).join(' / ')}`);
}
