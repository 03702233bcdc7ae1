/**
 * Parent side of the benchmark's fake gateway (fake-gateway.ts): forks it as its own process,
 * so its CPU is its own and can be read from /proc, and exposes its counters.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FakeGatewayCommand, FakeGatewayCounts, FakeGatewayEvent } from './fake-gateway-protocol.js';

export type { FakeGatewayCounts } from './fake-gateway-protocol.js';

/** The running fake. */
export interface FakeGatewayProcess {
  pid: number;
  /** `https://127.0.0.1:<port>`: both the APNs and the FCM endpoint. */
  origin: string;
  /** FCM's OAuth2 token URI. */
  tokenUri: string;
  /** PEM file clients must trust (`caFile`). */
  caFile: string;
  /** Zeroes the counters. */
  reset(): void;
  /**
   * Resolves with the counters once `total` requests were answered 200 since the last reset;
   * rejects after `timeoutMs`. The time the answer arrives here is the hand-off's end.
   */
  waitFor(total: number, timeoutMs: number): Promise<FakeGatewayCounts>;
  counts(): Promise<FakeGatewayCounts>;
  stop(): Promise<void>;
}

/** Forks the fake and resolves once it listens. */
export async function startFakeGateway(repoRoot: string): Promise<FakeGatewayProcess> {
  const fixtures = join(repoRoot, 'test/fixtures');
  const entry = fileURLToPath(new URL('./fake-gateway.js', import.meta.url));
  const child: ChildProcess = fork(entry, [join(fixtures, 'server.pem'), join(fixtures, 'server-key.pem')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiters = new Map<FakeGatewayEvent['type'], (event: FakeGatewayEvent) => void>();
  child.on('message', (event: FakeGatewayEvent) => {
    const waiter = waiters.get(event.type);
    waiters.delete(event.type);
    waiter?.(event);
  });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`fake gateway exited with ${code}`))));
  exited.catch(() => undefined);
  const next = <T extends FakeGatewayEvent['type']>(type: T, timeoutMs: number): Promise<Extract<FakeGatewayEvent, { type: T }>> => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      new Promise<Extract<FakeGatewayEvent, { type: T }>>((resolve) => {
        waiters.set(type, (event) => resolve(event as Extract<FakeGatewayEvent, { type: T }>));
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          waiters.delete(type);
          reject(new Error(`fake gateway: no ${type} within ${timeoutMs / 1000} s`));
        }, timeoutMs);
      }),
      exited,
    ]).finally(() => clearTimeout(timer));
  };
  const command = (message: FakeGatewayCommand): void => {
    child.send(message);
  };

  const listening = await next('listening', 10_000);
  return {
    pid: listening.pid,
    origin: `https://127.0.0.1:${listening.h2Port}`,
    tokenUri: `https://127.0.0.1:${listening.tokenPort}/token`,
    caFile: join(fixtures, 'ca.pem'),
    reset: () => command({ type: 'reset' }),
    waitFor: async (total, timeoutMs) => {
      const reached = next('reached', timeoutMs);
      command({ type: 'notify', total });
      return (await reached).counts;
    },
    counts: async () => {
      const stats = next('stats', 5_000);
      command({ type: 'stats' });
      return (await stats).counts;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await gone;
    },
  };
}
