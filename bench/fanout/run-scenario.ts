/**
 * The frame of one scenario on one set of freshly started servers, shared by bench:fanout and
 * bench:cluster: start the servers, fork the load clients, open the keep-alive trigger
 * connections to the first server, measure (bounded in time), then tear everything down. A
 * failure anywhere becomes the outcome's `error`, so one broken scenario does not end the run.
 */
import { ClientPool } from './client-pool.js';
import type { TargetOutcome } from './report.js';
import type { Metric } from './scenarios.js';
import { BENCH_APP, type RunningTarget } from './targets.js';
import { TriggerClient } from './trigger-client.js';

/** Races `promise` against a timer: rejects with "<what> took longer than N s" when it runs out. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ScenarioRun {
  /** E.g. `unicast on herald`: logged first and named in a timeout error. */
  label: string;
  /** Starts the servers; triggers go to the first. */
  start(): Promise<RunningTarget[]>;
  measure(servers: RunningTarget[], pool: ClientPool, trigger: TriggerClient): Promise<Metric[]>;
  /** Runs after the servers stopped, whatever happened. */
  afterStop?(): Promise<void>;
  clientProcesses: number;
  httpConnections: number;
  payloadBytes: number;
  timeoutMs: number;
  log(line: string): void;
}

function failed(run: ScenarioRun, err: unknown, started: number): TargetOutcome {
  const error = err instanceof Error ? err.message : String(err);
  run.log(`  ERROR: ${error.split('\n')[0]}`);
  return { error, elapsedMs: performance.now() - started };
}

export async function runScenario(run: ScenarioRun): Promise<TargetOutcome> {
  const started = performance.now();
  run.log(run.label);
  let servers: RunningTarget[];
  try {
    servers = await run.start();
  } catch (err) {
    await run.afterStop?.();
    return failed(run, err, started);
  }
  const pool = new ClientPool(run.clientProcesses);
  const trigger = new TriggerClient(servers[0]!.baseUrl, BENCH_APP, run.httpConnections, run.payloadBytes);
  try {
    const metrics = await withTimeout(run.measure(servers, pool, trigger), run.timeoutMs, run.label);
    return { metrics, elapsedMs: performance.now() - started };
  } catch (err) {
    return failed(run, err, started);
  } finally {
    trigger.close();
    await withTimeout(pool.closeSockets(), 30_000, 'closing sockets').catch(() => undefined);
    await pool.dispose();
    await Promise.all(servers.map((s) => s.stop()));
    await run.afterStop?.();
  }
}
