/**
 * Removing an app on one node, through the admin API (DELETE) or from the config file on a
 * reload, against the built server with pusher-js members and a real webhook receiver: every
 * socket of the app closes with 4001, every member is removed and every channel vacated with
 * their webhooks, delivered to the URL the app had and signed with its key although the app is
 * gone; and an app created again with the same id starts empty (no occupancy, member, count or
 * cached event), as the channel HTTP API and a new member see it, with its whole daily message
 * quota (triggers through the pusher SDK).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import { adminRequest, type AdminRequest } from '../helpers/admin-client.js';
import { closedWith4001, occupy, removalHook, removalWebhooks, startsEmpty } from '../helpers/app-removal.js';
import { ClientPool } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const TOKEN = 'app-removal-admin-token-0123456789';
const USERS = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6'];

let herald: HeraldProcess;
let receiver: WebhookReceiver;
const pools: ClientPool[] = [];

/** An app of the config file, with webhooks, that the reload test removes and adds back. */
const FILE_APP = { id: 'file-app', key: 'file-key', secret: 'file-secret', subscriptionCount: true };

function fileConfig(apps: Record<string, unknown>[]): Record<string, unknown> {
  return { admin: { token: TOKEN }, apps, push: [] };
}

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  herald = await startHerald({ config: fileConfig([{ ...FILE_APP, webhooks: [removalHook(receiver.url('/file'))] }]), env: { HERALD_LOG_LEVEL: 'info' } });
}, 60_000);
afterEach(() => {
  for (const p of pools.splice(0)) p.disconnectAll();
});
afterAll(async () => {
  await herald?.dispose();
  await receiver?.close();
});

function pool(creds: { id: string; key: string; secret: string }): ClientPool {
  const p = new ClientPool(creds);
  pools.push(p);
  return p;
}

function admin(path: string, init: AdminRequest = {}): Promise<Response> {
  return adminRequest(herald.baseUrl, TOKEN, path, init);
}

async function createApp(fields: Record<string, unknown>): Promise<{ id: string; key: string; secret: string }> {
  const res = await admin('/apps', { method: 'POST', body: fields });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; key: string; secret: string };
}

/** Triggers one event on one channel (one message of the quota) with the pusher SDK; answers the HTTP status. */
async function triggerStatus(creds: { id: string; key: string; secret: string }): Promise<number> {
  const sdk = new Pusher({ appId: creds.id, key: creds.key, secret: creds.secret, host: '127.0.0.1', port: String(herald.port), useTLS: false });
  try {
    return (await sdk.trigger('quota-channel', 'counted', { n: 1 })).status;
  } catch (err) {
    if (err instanceof Pusher.RequestError && err.status !== undefined) return err.status;
    throw err;
  }
}

/** Writes the config, sends SIGHUP and waits for the reload's outcome line. */
async function reload(config: Record<string, unknown>): Promise<void> {
  const reloads = (): number => herald.stderr.split('\n').filter((l) => l.includes('"msg":"config reloaded"')).length;
  const before = reloads();
  herald.writeConfig(config);
  herald.signal('SIGHUP');
  await until(() => reloads() > before, 'the reload', 20_000);
}

describe('a removed app leaves nothing behind', () => {
  it('deleted through the admin API: sockets closed 4001, member_removed and channel_vacated at the URL it had, and the id re-created starts empty', async () => {
    const old = await createApp({ id: 'doomed', key: 'doomed-key', subscriptionCount: true, webhooks: [removalHook(receiver.url('/doomed'))] });
    const clients = await occupy(pool(old), [herald], USERS, receiver, '/doomed');

    expect((await admin('/apps/doomed', { method: 'DELETE' })).status).toBe(204);
    await closedWith4001(clients);
    await removalWebhooks(receiver, '/doomed', USERS, old.key);

    const again = await createApp({ id: 'doomed', key: 'doomed-key-2', subscriptionCount: true, webhooks: [removalHook(receiver.url('/doomed-again'))] });
    await startsEmpty(pool(again), [herald]);
  }, 60_000);

  it('deleted through the admin API: the id re-created has its whole daily message quota', async () => {
    const old = await createApp({ id: 'quota-app', key: 'quota-key', messageQuota: 5 });
    for (let i = 0; i < 3; i++) expect(await triggerStatus(old), `old app trigger ${i}`).toBe(200);

    expect((await admin('/apps/quota-app', { method: 'DELETE' })).status).toBe(204);
    const again = await createApp({ id: 'quota-app', key: 'quota-key-2', messageQuota: 5 });
    for (let i = 0; i < 5; i++) expect(await triggerStatus(again), `new app trigger ${i}`).toBe(200);
    expect(await triggerStatus(again), 'past the quota').toBe(403);
  }, 60_000);

  it('removed from the config file on a reload: the same; added back, it starts empty', async () => {
    const clients = await occupy(pool(FILE_APP), [herald], USERS, receiver, '/file');

    await reload(fileConfig([]));
    await closedWith4001(clients);
    await removalWebhooks(receiver, '/file', USERS, FILE_APP.key);

    await reload(fileConfig([{ ...FILE_APP, webhooks: [removalHook(receiver.url('/file-again'))] }]));
    await startsEmpty(pool(FILE_APP), [herald]);
  }, 60_000);
});
