/**
 * The sandbox gateway in process, driven by Herald's own gateway clients built from the
 * settings it gives (parsed by Herald's config schema): each platform accepts a send and
 * records it; a restart in the same directory serves the same certificate and keys, and the
 * web push subscriptions made before it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pushInstanceSchema } from '../../../src/config/schema.js';
import { closeGatewayClients, createGatewayClients } from '../../../src/push/gateways/factory.js';
import { startSandboxGateway, type RunningSandboxGateway, type SandboxPushConfig } from '../../../src/sandbox/sandbox-gateway.js';

const dir = mkdtempSync(join(tmpdir(), 'herald-sandbox-unit-'));
const running = new Set<RunningSandboxGateway>();
const lines: string[] = [];

afterAll(async () => {
  await Promise.all([...running].map((sandbox) => sandbox.stop()));
  rmSync(dir, { recursive: true, force: true });
});

async function start(port = 0): Promise<RunningSandboxGateway> {
  const sandbox = await startSandboxGateway({ host: '127.0.0.1', port, dir, log: (line) => lines.push(line) });
  running.add(sandbox);
  return sandbox;
}

async function stop(sandbox: RunningSandboxGateway): Promise<void> {
  await sandbox.stop();
  running.delete(sandbox);
}

/** Herald's clients for the sandbox's settings, as a shard builds them from a push instance. */
function clientsFor(pushConfig: SandboxPushConfig): ReturnType<typeof createGatewayClients> {
  const instance = pushInstanceSchema.parse({ instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'secret', ...pushConfig });
  return createGatewayClients(instance, { retry: { attempts: 1 } });
}

describe('startSandboxGateway', () => {
  it('refuses a host that is not loopback', async () => {
    await expect(startSandboxGateway({ host: '0.0.0.0', port: 0, dir, log: () => undefined })).rejects.toThrow(/loopback only/);
  });

  it('accepts a send on each platform from Herald\'s clients and records it', async () => {
    const sandbox = await start();
    const made = (await (await fetch(`${sandbox.pageUrl}/web-subscriptions?name=tab`, { method: 'POST' })).json()) as { name: string; token: string };
    const clients = clientsFor(sandbox.pushConfig);
    try {
      const apnsToken = 'ab'.repeat(32);
      expect(await clients.apns!.send({ deviceId: 'a', token: apnsToken, payload: { aps: { alert: 'hi' } }, bundleIdentifier: 'com.example' })).toEqual({ kind: 'sent' });
      expect(await clients.fcm!.send({ deviceId: 'f', token: 'fcm-token', payload: { notification: { title: 'hi' } } })).toEqual({ kind: 'sent' });
      expect(await clients.web!.send({ deviceId: 'w', token: made.token, payload: { notification: { title: 'hi' } } })).toEqual({ kind: 'sent' });
    } finally {
      await closeGatewayClients(clients);
    }
    expect(sandbox.received().map((n) => [n.platform, n.token, n.status, n.answer])).toEqual([
      ['apns', 'ab'.repeat(32), 200, 'accepted'],
      ['fcm', 'fcm-token', 200, 'accepted'],
      ['web', made.name, 201, 'accepted'],
    ]);
    expect(sandbox.received()[2]!.payload).toEqual({ notification: { title: 'hi' } });
    expect(lines.some((line) => line.startsWith('fcm  200 accepted token fcm-token {"notification":{"title":"hi"}}'))).toBe(true);
    await stop(sandbox);
  });

  it('answers its own routes for loopback names only, and refuses a POST from a page served elsewhere', async () => {
    const sandbox = await start();
    const status = (method: string, path: string, headers: Record<string, string>): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = request(`${sandbox.pageUrl}${path}`, { method, headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await status('GET', '/received', { host: `localhost:${sandbox.port}` })).toBe(200);
    // A page whose DNS name was rebound to 127.0.0.1 sends its own name as Host.
    expect(await status('GET', '/received', { host: `attacker.example:${sandbox.port}` })).toBe(403);
    expect(await status('POST', '/web-subscriptions', { origin: 'https://attacker.example' })).toBe(403);
    expect(await status('POST', '/web-subscriptions', { origin: 'http://localhost:3000' })).toBe(201);
    await stop(sandbox);
  });

  it('keeps its certificate, keys and web push subscriptions across a restart in the same directory', async () => {
    const first = await start();
    const made = (await (await fetch(`${first.pageUrl}/web-subscriptions?name=kept`, { method: 'POST' })).json()) as { name: string; token: string };
    const { port, pushConfig } = first;
    await stop(first);

    const second = await start(port);
    expect(second.pushConfig).toEqual(pushConfig);
    const clients = clientsFor(second.pushConfig);
    try {
      expect(await clients.web!.send({ deviceId: 'w', token: made.token, payload: { notification: { title: 'after the restart' } } })).toEqual({ kind: 'sent' });
    } finally {
      await closeGatewayClients(clients);
    }
    expect(second.received().at(-1)).toMatchObject({ platform: 'web', token: made.name, status: 201, payload: { notification: { title: 'after the restart' } } });
  });
});
