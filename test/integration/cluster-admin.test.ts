/**
 * The admin overview and the dashboard of a cluster node (docs/admin-api.md `cluster`): the
 * nodes Redis records, which one answers, where Redis is, and what a node
 * says while Redis is away; in the API and in Chromium.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { chromiumAvailable, CHROMIUM_PATH, collectErrors, launchChromium } from '../helpers/browser.js';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'cluster-admin-token-0123456789';
const APP = { id: 'cadmin-app', key: 'cadmin-key', secret: 'cadmin-secret' };
const bed = heraldClusterBed('cadmin');

interface ClusterView {
  nodeId: string;
  redis: string;
  keyPrefix: string;
  nodeTimeoutMs: number;
  available: boolean;
  nodes: { nodeId: string; session: string; self: boolean; expiresInMs: number }[] | null;
  reaping: number | null;
}

async function clusterOf(node: HeraldProcess): Promise<ClusterView> {
  const res = await fetch(`${node.baseUrl}/admin/v1/overview`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { cluster: ClusterView }).cluster;
}

describe.skipIf(ONE_PROCESS)('admin overview of a cluster node', () => {
  it('lists the nodes from Redis, marks the one answering, drops a killed node once reaped, and answers during an outage', async () => {
    const cluster = await bed.start({ apps: [APP], config: { admin: { token: TOKEN } } });
    const fromA = await clusterOf(cluster.a);
    expect(fromA).toMatchObject({ nodeId: 'node-a', redis: bed.redis.url, keyPrefix: cluster.keyPrefix, nodeTimeoutMs: cluster.nodeTimeoutMs, available: true, reaping: 0 });
    expect(fromA.nodes!.map((n) => [n.nodeId, n.self])).toEqual([['node-a', true], ['node-b', false]]);
    for (const n of fromA.nodes!) {
      expect(n.session).toMatch(new RegExp(`^${n.nodeId}\\.[0-9a-f]+$`));
      expect(n.expiresInMs).toBeGreaterThan(0);
      expect(n.expiresInMs).toBeLessThanOrEqual(cluster.nodeTimeoutMs);
    }
    expect((await clusterOf(cluster.b)).nodes!.map((n) => [n.nodeId, n.self])).toEqual([['node-a', false], ['node-b', true]]);

    await cluster.killNode(cluster.b);
    const alone = await until(async () => {
      const nodes = (await clusterOf(cluster.a)).nodes!;
      return nodes.length === 1 && nodes;
    }, 'node-b dropped from the list once reaped', cluster.nodeTimeoutMs * 4);
    expect(alone[0]).toMatchObject({ nodeId: 'node-a', self: true });

    await cluster.killRedis();
    const away = await until(async () => {
      const view = await clusterOf(cluster.a);
      return !view.available && view;
    }, 'the overview saying Redis is away', 10_000);
    expect(away).toMatchObject({ nodeId: 'node-a', available: false, nodes: null, reaping: null });
    await cluster.restartRedis();
  }, 60_000);
});

describe.skipIf(ONE_PROCESS || process.env.HERALD_SKIP_BROWSER === '1')('dashboard of a cluster node in Chromium', () => {
  let browser: Browser;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    if (!chromiumAvailable()) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: apt-get install -y chromium (or HERALD_SKIP_BROWSER=1 to skip these tests)`);
    browser = await launchChromium();
  }, 30_000);
  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('shows the cluster card: both nodes, this one marked, where Redis is, and the outage', async () => {
    const cluster = await bed.start({ apps: [APP], config: { admin: { token: TOKEN } } });
    context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    const errors = collectErrors(page);
    await page.goto(`${cluster.b.baseUrl}/dashboard#token=${TOKEN}`);
    const card = page.getByRole('region', { name: 'Cluster' });
    await card.getByRole('cell', { name: 'node-a' }).waitFor();
    await card.getByRole('cell', { name: 'node-b this node' }).waitFor();
    expect(await card.getByRole('cell', { name: 'alive', exact: true }).count()).toBe(2);
    expect(await card.textContent()).toContain(`Redis ${bed.redis.url}`);
    expect(await card.textContent()).toContain(': connected');

    await cluster.killRedis();
    // The page polls the overview every 3 s.
    await card.getByText('Redis unavailable, the channel API answers 503').waitFor({ timeout: 15_000 });
    await card.getByText('The nodes are unknown while Redis cannot be read.').waitFor();
    await cluster.restartRedis();
    await card.getByRole('cell', { name: 'node-b this node' }).waitFor({ timeout: 15_000 });
    await until(async () => (await card.textContent())?.includes(': connected'), 'connected again', 15_000);
    expect(errors.filter((e) => !/status of 503/.test(e))).toEqual([]);
  }, 60_000);
});
