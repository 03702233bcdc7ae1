/**
 * The admin overview with many apps, through the real admin API and pusher-js: its apps (and
 * push instances) come a page at a time in id order, every app exactly once over the pages,
 * with their totals; the answer's size does not grow with the apps; the node's figures
 * (connections, occupied channels) and the apps' own follow creates, deletes, connects,
 * subscriptions and disconnects; the front-end threads with the connections on each, for one
 * thread and for two (a pusher-js client placed on each).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest, type AdminRequest } from '../helpers/admin-client.js';
import { ClientPool } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'overview-admin-token-0123456789';
/** Apps in the config file (the seed), beside those created through the API. */
const FILE_APPS = 2000;
const fileApp = (i: number) => ({ id: `file-${String(i).padStart(5, '0')}`, key: `file-key-${i}`, secret: `file-secret-${i}` });

interface OverviewApp {
  id: string;
  connections: number;
  occupiedChannels: number | null;
}
interface Overview {
  node: { connections: number; occupiedChannels: number | null };
  frontEnd: { threads: number; connections: number[] };
  apps: OverviewApp[];
  appsTotal: number;
  appsNextCursor: string | null;
  pushInstances: { instanceId: string }[];
  pushInstancesTotal: number;
  pushInstancesNextCursor: string | null;
}

let herald: HeraldProcess;
const pools: ClientPool[] = [];

beforeAll(async () => {
  herald = await startHerald({ config: { frontEndThreads: 1, admin: { token: TOKEN }, apps: Array.from({ length: FILE_APPS }, (_, i) => fileApp(i)) } });
}, 60_000);
afterEach(() => {
  for (const p of pools.splice(0)) p.disconnectAll();
});
afterAll(async () => {
  await herald?.dispose();
});

function admin(path: string, init: AdminRequest = {}, node: HeraldProcess = herald): Promise<Response> {
  return adminRequest(node.baseUrl, TOKEN, path, init);
}

/** One overview answer (of `node`, default the many-apps one): its parsed body and its size in bytes. */
async function overview(query = '', node: HeraldProcess = herald): Promise<{ body: Overview; bytes: number }> {
  const res = await admin(`/overview${query}`, {}, node);
  const text = await res.text();
  expect(res.status, text.slice(0, 300)).toBe(200);
  return { body: JSON.parse(text) as Overview, bytes: Buffer.byteLength(text) };
}

/** Every app id over the pages of `limit`, in the order the pages give them. */
async function allPages(limit: number): Promise<{ ids: string[]; pages: number; largestBytes: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  let largestBytes = 0;
  do {
    const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const { body, bytes } = await overview(query);
    expect(body.apps.length).toBeLessThanOrEqual(limit);
    ids.push(...body.apps.map((a) => a.id));
    largestBytes = Math.max(largestBytes, bytes);
    cursor = body.appsNextCursor;
    pages++;
  } while (cursor !== null && pages < 1000);
  return { ids, pages, largestBytes };
}

async function createApp(id: string): Promise<{ id: string; key: string; secret: string }> {
  const res = await admin('/apps', { method: 'POST', body: { id, key: `${id}-key` } });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; key: string; secret: string };
}

/** The overview's entry of one app (the page that starts with it). */
async function appEntry(id: string, ids: readonly string[]): Promise<{ app: OverviewApp | undefined; node: Overview['node'] }> {
  const sorted = [...ids].sort();
  const before = sorted[sorted.indexOf(id) - 1];
  const { body } = await overview(`?limit=1${before ? `&cursor=${encodeURIComponent(before)}` : ''}`);
  return { app: body.apps.find((a) => a.id === id), node: body.node };
}

describe('the admin overview with many apps', () => {
  it('gives every app exactly once over its pages, in id order, with the total, and a bounded answer', async () => {
    const created = await Promise.all(['api-b', 'api-a', 'zz-last', 'api-c'].map((id) => createApp(id)));
    const expected = [...Array.from({ length: FILE_APPS }, (_, i) => fileApp(i).id), ...created.map((a) => a.id)].sort();

    for (const limit of [200, 7]) {
      const { ids, pages, largestBytes } = await allPages(limit);
      expect(ids).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / limit));
      // A page of at most 200 apps, however many there are.
      expect(largestBytes).toBeLessThan(100 * 1024);
    }
    // As the dashboard asks it (no limit): the first page, its total and where the next begins.
    const { body, bytes } = await overview();
    expect(body.appsTotal).toBe(expected.length);
    expect(body.apps.map((a) => a.id)).toEqual(expected.slice(0, body.apps.length));
    expect(body.appsNextCursor).toBe(expected[body.apps.length - 1]);
    expect(bytes).toBeLessThan(100 * 1024);
    expect(body.pushInstancesTotal).toBe(body.pushInstances.length);
    expect(body.pushInstancesNextCursor).toBeNull();

    // Deleted apps leave the pages and the total.
    for (const id of ['api-a', 'zz-last']) expect((await admin(`/apps/${id}`, { method: 'DELETE' })).status).toBe(204);
    const after = expected.filter((id) => id !== 'api-a' && id !== 'zz-last');
    expect((await allPages(200)).ids).toEqual(after);
    expect((await overview()).body.appsTotal).toBe(after.length);
  });

  it('refuses a page size out of range', async () => {
    for (const query of ['?limit=0', '?limit=201', '?limit=abc', '?pushLimit=1000']) {
      const res = await admin(`/overview${query}`);
      expect(res.status, query).toBe(400);
    }
  });

  it('keeps the node totals and the apps\' own figures up to date through connects, subscriptions and disconnects', async () => {
    const app = await createApp('counted-app');
    const other = fileApp(7);
    const ids = (await allPages(200)).ids;
    const base = (await overview()).body.node;

    const clients = new ClientPool(app);
    pools.push(clients);
    const [a, b] = [await clients.connect(herald), await clients.connect(herald)];
    const others = new ClientPool(other);
    pools.push(others);
    const c = await others.connect(herald);
    await a.subscribe('room-1');
    await b.subscribe('room-1');
    await b.subscribe('presence-room');
    await c.subscribe('room-1');

    await until(async () => {
      const { app: entry, node } = await appEntry('counted-app', ids);
      return entry?.connections === 2 && entry.occupiedChannels === 2 && node.connections === base.connections + 3 && node.occupiedChannels === base.occupiedChannels! + 3;
    }, 'the overview counting 3 connections and 3 occupied channels (2 of counted-app)');
    expect((await appEntry(other.id, ids)).app).toMatchObject({ connections: 1, occupiedChannels: 1 });
    // One front-end thread: it holds every connection of the node.
    const { body } = await overview();
    expect(body.frontEnd).toEqual({ threads: 1, connections: [body.node.connections] });

    b.unsubscribe('presence-room');
    await until(async () => (await appEntry('counted-app', ids)).app?.occupiedChannels === 1, 'presence-room vacated');
    clients.disconnectAll();
    others.disconnectAll();
    await until(async () => {
      const { app: entry, node } = await appEntry('counted-app', ids);
      return entry?.connections === 0 && entry.occupiedChannels === 0 && node.connections === base.connections && node.occupiedChannels === base.occupiedChannels;
    }, 'the overview back to the figures before the clients');
  });
});

describe('the admin overview with two front-end threads', () => {
  const APP = { id: 'threads-app', key: 'threads-key', secret: 'threads-secret' };
  let threaded: HeraldProcess;

  beforeAll(async () => {
    threaded = await startHerald({ config: { frontEndThreads: 2, admin: { token: TOKEN }, apps: [APP] } });
  }, 60_000);
  afterAll(async () => {
    await threaded?.dispose();
  });

  it('gives the threads and the connections on each', async () => {
    expect((await overview('', threaded)).body.frontEnd).toEqual({ threads: 2, connections: [0, 0] });
    const clients = new ClientPool(APP);
    pools.push(clients);
    await clients.connectOnThread(threaded, 0);
    await clients.connectOnThread(threaded, 1);
    await until(async () => {
      const { body } = await overview('', threaded);
      return body.frontEnd.connections.join() === '1,1' && body.node.connections === 2;
    }, 'the overview counting one connection on each thread');
    expect((await overview('', threaded)).body.frontEnd).toEqual({ threads: 2, connections: [1, 1] });

    clients.disconnectAll();
    await until(async () => (await overview('', threaded)).body.frontEnd.connections.join() === '0,0', 'both threads back to no connection');
  });
});
