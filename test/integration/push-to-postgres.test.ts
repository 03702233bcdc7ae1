/**
 * `herald push-to-postgres` through the real CLI: a single node's devices (with interests and
 * users, on 2 shards), written by the built server through the device API, end up in a private
 * PostgreSQL exactly as they were, with the node's installation secret. The copy is killed
 * (SIGKILL) and interrupted (SIGINT) mid-way between batches, run again, and run once more
 * after it finished: nothing lost, nothing duplicated. It refuses while a server holds the
 * data dir.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresDeviceStore } from '../../src/push/store/postgres/postgres-device-store.js';
import { deviceShardFor } from '../../src/shards/hash.js';
import { CLI, DEFAULT_PUSH, HeraldProcess, REPO_ROOT } from '../helpers/herald-process.js';
import { PostgresServer } from '../helpers/postgres-server.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
const DEVICES = 30;
/** Devices per transaction in this test (HERALD_PUSH_TO_POSTGRES_BATCH). */
const BATCH = 4;

let postgres: PostgresServer;
let url: string;
let dataDir: string | undefined;
let herald: HeraldProcess | undefined;

interface Expected {
  id: string;
  token: string;
  interests: string[];
  userId: string | undefined;
}
const expected: Expected[] = [];

interface Run {
  kill(signal: NodeJS.Signals): void;
  /** Resolves once the output contains `text`. */
  printed(text: string): Promise<void>;
  done: Promise<{ code: number | null; signal: string | null; output: string }>;
}

function runCommand(env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [CLI, 'push-to-postgres', '--data-dir', dataDir!, '--postgres-url', url], {
    cwd: REPO_ROOT,
    env: { ...process.env, HERALD_LOG_LEVEL: 'warn', HERALD_TEST_HOOKS: '1', HERALD_PUSH_TO_POSTGRES_BATCH: String(BATCH), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const done = new Promise<{ code: number | null; signal: string | null; output: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, output })),
  );
  return {
    kill: (signal) => child.kill(signal),
    printed: async (text) => void (await until(() => output.includes(text) || child.exitCode !== null, `"${text}" from push-to-postgres`, 30_000)),
    done,
  };
}

async function count(table: string): Promise<number> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}

async function deviceApi(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${herald!.baseUrl}/device_api/v1/instances/${INSTANCE}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

beforeAll(async () => {
  postgres = await new PostgresServer().start();
  url = await postgres.createDatabase('moved');
}, 120_000);

afterAll(async () => {
  await herald?.dispose();
  await postgres?.dispose();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('herald push-to-postgres', () => {
  it('copies a node through a SIGKILL and a SIGINT, runs again without duplicates, and refuses beside a server', async () => {
    herald = await new HeraldProcess({ shards: 2, config: {} }).start();
    dataDir = herald.dataDir;
    const beams = beamsSdk(herald.port);
    for (let n = 0; n < DEVICES; n++) {
      const token = (n + 1).toString(16).padStart(64, 'a');
      const res = await deviceApi('POST', '/devices/apns', { token, bundleIdentifier: 'com.herald.move' });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      const interests = n % 5 === 0 ? [] : ['all', `group-${n % 3}`];
      if (interests.length > 0) expect((await deviceApi('PUT', `/devices/apns/${id}/interests`, { interests })).status).toBe(200);
      const userId = n % 2 === 0 ? `user-${n % 4}` : undefined;
      if (userId) {
        const { token: jwt } = beams.generateToken(userId);
        expect((await deviceApi('PUT', `/devices/apns/${id}/user`, undefined, { authorization: `Bearer ${jwt}` })).status).toBe(200);
      }
      expected.push({ id, token, interests, userId });
    }

    // A server holds the data dir: the command refuses and writes nothing.
    const busy = await runCommand().done;
    expect(busy.code).toBe(1);
    expect(busy.output).toMatch(/stop Herald/);
    await herald.stop();

    // The command copies shard by shard, BATCH devices per transaction: the devices committed
    // after k batches (the last batch of a shard may be short).
    const batchSizes = [0, 1].flatMap((shard) => {
      const sizes: number[] = [];
      for (let left = expected.filter((d) => deviceShardFor(d.id, 2) === shard).length; left > 0; left -= BATCH) sizes.push(Math.min(BATCH, left));
      return sizes;
    });
    const afterBatches = (k: number): number => batchSizes.slice(0, k).reduce((a, b) => a + b, 0);

    // SIGKILL between batches: what was committed stays, the rest is missing.
    const killed = runCommand({ HERALD_PUSH_TO_POSTGRES_PAUSE_AFTER_BATCHES: '2' });
    await killed.printed('paused');
    killed.kill('SIGKILL');
    expect((await killed.done).signal).toBe('SIGKILL');
    expect(await count('herald_push_devices')).toBe(afterBatches(2));

    // SIGINT: stops after the batch under way and says to run it again.
    const interrupted = runCommand({ HERALD_PUSH_TO_POSTGRES_PAUSE_AFTER_BATCHES: '3' });
    await interrupted.printed('paused');
    interrupted.kill('SIGINT');
    const stopped = await interrupted.done;
    expect(stopped.code).toBe(130);
    expect(stopped.output).toMatch(/run it again/);
    expect(await count('herald_push_devices')).toBe(afterBatches(3));

    // Run again to the end, and once more: the same rows, exactly the node's.
    for (let run = 0; run < 2; run++) {
      const finished = await runCommand().done;
      expect(finished.code, finished.output).toBe(0);
      expect(finished.output).toContain(`${DEVICES} device(s)`);
      expect(await count('herald_push_devices')).toBe(DEVICES);
      expect(await count('herald_push_device_interests')).toBe(expected.reduce((n, d) => n + d.interests.length, 0));
    }

    const store = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    try {
      const { installSecret } = JSON.parse(readFileSync(join(dataDir, 'herald.json'), 'utf8')) as { installSecret: string };
      expect(await store.installSecret('another secret')).toBe(installSecret);
      for (const device of expected) {
        const got = await store.get(INSTANCE, device.id);
        expect(got, device.id).toMatchObject({ platform: 'apns', token: device.token, bundleIdentifier: 'com.herald.move', interestCount: device.interests.length });
        expect(got!.userId).toBe(device.userId);
        expect(await store.listInterests(INSTANCE, device.id, 100)).toEqual({ interests: [...device.interests].sort() });
      }
      expect(await store.countUserDevices(INSTANCE, 'user-0')).toBe(expected.filter((d) => d.userId === 'user-0').length);
      expect(await store.checkConsistency()).toEqual([]);
    } finally {
      await store.close();
    }
  }, 240_000);
});
