/**
 * What Herald runs with, against the built server: without a config file the development
 * defaults, on loopback only, with client events and user sign-in on; a config file means
 * exactly what it says (`{}`: no app, no push instance, no dashboard, also after a reload),
 * and the start-up banner says so and prints the address really listened on.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import WebSocket from 'ws';
import { DEFAULT_APP, DEFAULT_PUSH, HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const running: HeraldProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((h) => h.dispose()));
});

async function start(options: ConstructorParameters<typeof HeraldProcess>[0]): Promise<HeraldProcess> {
  const herald = new HeraldProcess({ shards: 1, ...options });
  running.push(herald);
  return herald.start();
}

/** A raw protocol client: every frame it got, and how it closed. */
async function connect(herald: HeraldProcess, key: string) {
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${key}?protocol=7&client=js&version=8.4.0`);
  const frames: Frame[] = [];
  let closedWith: number | undefined;
  ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
  ws.on('close', (code) => (closedWith = code));
  ws.on('error', () => undefined);
  const event = async (name: string, channel?: string): Promise<Frame> => {
    await until(() => frames.some((f) => f.event === name && (channel === undefined || f.channel === channel)) || closedWith !== undefined, `${name} on ${key}`);
    const frame = frames.find((f) => f.event === name && (channel === undefined || f.channel === channel));
    if (!frame) throw new Error(`closed with ${closedWith} before ${name}: ${JSON.stringify(frames)}`);
    return frame;
  };
  const closed = async (): Promise<number> => {
    await until(() => closedWith !== undefined, `close of ${key}`);
    return closedWith!;
  };
  return { ws, frames, event, closed, send: (frame: unknown) => ws.send(JSON.stringify(frame)) };
}

function sign(secret: string, text: string): string {
  return createHmac('sha256', secret).update(text).digest('hex');
}

/** A non-loopback IPv4 address of this machine, if it has one. */
const otherAddress = Object.values(networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

describe('without a config file (development mode)', () => {
  it('listens on loopback only unless HERALD_HOST and HERALD_EXPOSE_DEVELOPMENT_DEFAULTS say otherwise, and the banner prints the real address', async () => {
    // HERALD_HOST empty counts as unset (the helper sets it otherwise).
    const dev = await start({ env: { HERALD_HOST: '' } });
    expect(dev.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+ \(ws:/);
    expect(dev.stdout).toContain('development mode (no config file): loopback only');
    expect(dev.stdout).toContain('WARNING: built-in development credentials are active');
    if (otherAddress) {
      await expect(fetch(`http://${otherAddress}:${dev.port}/ready`)).rejects.toThrow();
    }
    const refused = new HeraldProcess({ shards: 1, env: { HERALD_HOST: '0.0.0.0' } });
    running.push(refused);
    await expect(refused.start()).rejects.toThrow(/exited with 1 before listening/);
    expect(refused.stderr).toContain('it will not serve them on 0.0.0.0, which is not a loopback address');
    expect(refused.stderr).toContain('HERALD_EXPOSE_DEVELOPMENT_DEFAULTS=1');
    const everywhere = await start({ env: { HERALD_HOST: '0.0.0.0', HERALD_EXPOSE_DEVELOPMENT_DEFAULTS: '1' } });
    expect(everywhere.stdout).toMatch(/listening on http:\/\/0\.0\.0\.0:\d+, every network interface/);
    expect(everywhere.stdout).toContain('listening on 0.0.0.0 as HERALD_HOST says');
    if (otherAddress) expect((await fetch(`http://${otherAddress}:${everywhere.port}/ready`)).status).toBe(200);
  });

  it('turns client events (whispers) and user sign-in on for the development app', async () => {
    const dev = await start({});
    const alice = await connect(dev, DEFAULT_APP.key);
    const bob = await connect(dev, DEFAULT_APP.key);
    const channel = 'private-whispers';
    for (const client of [alice, bob]) {
      const socketId = ((await client.event('pusher:connection_established')).data as { socket_id: string }).socket_id;
      client.send({ event: 'pusher:subscribe', data: { channel, auth: `${DEFAULT_APP.key}:${sign(DEFAULT_APP.secret, `${socketId}:${channel}`)}` } });
      await client.event('pusher_internal:subscription_succeeded', channel);
      if (client === alice) {
        const userData = JSON.stringify({ id: 'alice' });
        client.send({ event: 'pusher:signin', data: { user_data: userData, auth: `${DEFAULT_APP.key}:${sign(DEFAULT_APP.secret, `${socketId}::user::${userData}`)}` } });
        await client.event('pusher:signin_success');
      }
    }
    alice.send({ event: 'client-typing', channel, data: { typing: true } });
    expect((await bob.event('client-typing', channel)).data).toEqual({ typing: true });
    alice.ws.close();
    bob.ws.close();
  });
});

describe('a config file means what it says', () => {
  it('{}: no app, no push instance, no dashboard, no development credentials; the banner says how to turn the dashboard on', async () => {
    const empty = await start({ config: {}, bare: true });
    expect(empty.stdout).not.toContain('development credentials');
    expect(empty.stdout).toContain('dashboard: off (no admin token); to turn it on, set admin.token in the config file or HERALD_ADMIN_TOKEN');
    expect(empty.stdout).toContain('channels: no apps configured (apps[] in the config file)');
    expect(empty.stdout).toContain('push: no instances configured (push[] in the config file)');
    const socket = await connect(empty, DEFAULT_APP.key);
    expect(await socket.closed()).toBe(4001);
    await expect(channelsSdk(empty.port, DEFAULT_APP).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    const device = await fetch(`${empty.baseUrl}/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/devices/fcm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'fcm-token' }),
    });
    expect(device.status).toBe(404);
    expect((await fetch(`${empty.baseUrl}/dashboard`)).status).toBe(404);
    expect((await fetch(`${empty.baseUrl}/admin/v1/session`, { headers: { authorization: 'Bearer herald-dev-admin-token' } })).status).toBe(404);
  });

  it('a file without push gets no push instance; reloading {} empties the server instead of bringing the development app back', async () => {
    const app = { id: 'own-app', key: 'own-key', secret: 'own-secret-0123456789' };
    const herald = await start({ config: { apps: [app] }, bare: true, env: { HERALD_LOG_LEVEL: 'info' } });
    expect(herald.stdout).toContain('push: no instances configured');
    expect(herald.stdout).not.toContain('channels: no apps configured');
    expect((await channelsSdk(herald.port, app).trigger('ch', 'e', {})).status).toBe(200);
    herald.writeConfig({});
    herald.signal('SIGHUP');
    await until(() => herald.stderr.includes('"msg":"config reloaded"'), 'the reload', 20_000);
    await expect(channelsSdk(herald.port, app).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    await expect(channelsSdk(herald.port, DEFAULT_APP).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    expect(await (await connect(herald, DEFAULT_APP.key)).closed()).toBe(4001);
  });
});
