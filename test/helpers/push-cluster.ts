/**
 * The setup of a push cluster test file: heraldClusterBed's private redis-server, a private
 * PostgreSQL (the shared push store, one database per cluster) and the fake gateways, each
 * started before the file's first test and stopped after its last. With
 * HERALD_CLUSTER_TESTS_ONE_PROCESS=1 the fakes are not started (these files skip themselves).
 */
import { afterAll, beforeAll } from 'vitest';
import { startFakeGateways, type FakeGateways } from './fake-gateways.js';
import { filePostgresServer } from './file-postgres.js';
import { heraldClusterBed, ONE_PROCESS, type HeraldCluster, type HeraldClusterOptions } from './herald-cluster.js';
import { DEFAULT_PUSH } from './herald-process.js';
import type { PostgresServer } from './postgres-server.js';

export interface PushClusterOptions extends Omit<HeraldClusterOptions, 'push' | 'postgresUrl'> {
  /** The PostgreSQL database of this cluster's push store (created; unique within the file). */
  database: string;
  /** The push instances every node serves (the same list on each, as replicas run); default DEFAULT_PUSH on the fakes. */
  push?: Record<string, unknown>[];
}

export interface PushClusterBed {
  /** The file's fake gateways (from the first test on). */
  readonly fakes: FakeGateways;
  /** The file's PostgreSQL (from the first test on). */
  readonly postgres: PostgresServer;
  /** Starts a cluster on a new database; disposed of after the test that started it. */
  start(options: PushClusterOptions): Promise<HeraldCluster>;
  /** The same, nodes not started (the test starts them, `node.start()`). */
  create(options: PushClusterOptions): Promise<HeraldCluster>;
}

/** Registers the hooks of a push cluster test file; `name` starts its clusters' key prefixes. */
export function pushClusterBed(name: string): PushClusterBed {
  const clusters = heraldClusterBed(name);
  const postgres = filePostgresServer();
  let fakes: FakeGateways | undefined;
  beforeAll(async () => {
    if (ONE_PROCESS) return;
    fakes = await startFakeGateways();
  }, 60_000);
  afterAll(async () => {
    await fakes?.stop();
  });
  return {
    get fakes(): FakeGateways {
      if (!fakes) throw new Error('the fake gateways start in beforeAll');
      return fakes;
    },
    get postgres(): PostgresServer {
      return postgres();
    },
    async start(options) {
      return (await this.create(options)).start();
    },
    async create({ database, push, ...options }) {
      const instances = push ?? [this.fakes.instanceConfig({ ...DEFAULT_PUSH })];
      return clusters.create({
        ...options,
        push: Array.from({ length: options.nodes ?? 2 }, () => instances),
        postgresUrl: await postgres().createDatabase(database),
      });
    },
  };
}
