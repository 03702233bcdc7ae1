/**
 * A cluster node killed with SIGKILL (a real process, built code from dist/): the survivor reaps
 * it within nodeTimeoutMs plus a reaper period or two, reports member_removed and
 * channel_vacated once, and nothing more.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelTransition } from '../../src/channels/adapter/redis/channel-state.js';
import { SimulatedNode } from '../helpers/cluster-nodes.js';
import { REPO_ROOT } from '../helpers/herald-process.js';
import { RedisServer } from '../helpers/redis-server.js';
import { sleep, until } from '../helpers/wait.js';

const PREFIX = 'kill:';
let redis: RedisServer;
let survivor: SimulatedNode;
let victim: ChildProcess | undefined;

/** The victim: a ClusterNode in its own process, holding a socket, a presence member and a channel. */
function victimScript(redisUrl: string): string {
  const module = pathToFileURL(join(REPO_ROOT, 'dist/src/channels/adapter/redis/cluster-node.js')).href;
  const clusterModule = pathToFileURL(join(REPO_ROOT, 'dist/src/cluster/cluster.js')).href;
  return `
    const { ClusterNode } = await import(${JSON.stringify(module)});
    const { Cluster } = await import(${JSON.stringify(clusterModule)});
    const node = new ClusterNode(
      new Cluster({ redisUrl: ${JSON.stringify(redisUrl)}, keyPrefix: ${JSON.stringify(PREFIX)}, nodeTimeoutMs: 500 }, { nodeId: 'victim' }),
      { snapshot: () => ({ sockets: [], subscriptions: [] }), onTransitions() {}, onFrame() {} },
    );
    await node.start();
    await node.state.connect('app', 'v.1', null);
    await node.state.join('app', 'presence-room', 'v.1', { userId: 'victor' });
    await node.state.join('app', 'presence-room', 'v.2', { userId: 'alice' });
    await node.state.join('app', 'only-victim', 'v.1');
    process.stdout.write('ready\\n');
    setInterval(() => {}, 1000);
  `;
}

beforeAll(async () => {
  redis = await new RedisServer().start();
  survivor = new SimulatedNode({ redisUrl: redis.url, nodeId: 'survivor', keyPrefix: PREFIX, nodeTimeoutMs: 3000, heartbeatIntervalMs: 100, reapIntervalMs: 100 });
  await survivor.start();
});

afterAll(async () => {
  victim?.kill('SIGKILL');
  await survivor.node.stop(false).catch(() => {});
  await redis.stop();
});

describe('a cluster node killed with SIGKILL', () => {
  it('is reaped by the survivor: members removed and channels vacated once', async () => {
    await survivor.join('app', 'presence-room', 's.1', { userId: 'alice' });
    const child = spawn(process.execPath, ['--input-type=module', '-e', victimScript(redis.url)], { stdio: ['ignore', 'pipe', 'pipe'] });
    victim = child;
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await until(() => output.includes('ready') || child.exitCode !== null, 'victim ready', 20_000);
    expect(output).toContain('ready');
    expect(await survivor.state.presenceUserIds('app', 'presence-room')).toEqual(expect.arrayContaining(['alice', 'victor']));
    expect(await survivor.state.hasSocket('app', 'v.1')).toBe(true);

    child.kill('SIGKILL');
    const removed = (t: ChannelTransition) => t.type === 'member_removed';
    await until(() => survivor.transitions.some(removed) && survivor.transitions.some((t) => t.type === 'channel_vacated'), 'victim reaped', 20_000);
    // time: three more reaper passes (every 100 ms): nothing more may come of them.
    await sleep(300);
    expect(survivor.transitions.filter(removed)).toEqual([{ type: 'member_removed', appId: 'app', channel: 'presence-room', userId: 'victor' }]);
    expect(survivor.transitions.filter((t) => t.type === 'channel_vacated')).toEqual([{ type: 'channel_vacated', appId: 'app', channel: 'only-victim' }]);
    // alice is still there through the survivor's own connection.
    expect(await survivor.state.presenceUserIds('app', 'presence-room')).toEqual(['alice']);
    expect(await survivor.state.hasSocket('app', 'v.1')).toBe(false);
  });
});
