/**
 * Server-side request forgery through host names, against the built server: a web push
 * endpoint and a per-publish webhookUrl whose host is a *name* (the machine's own host name,
 * which resolves to a loopback or private address through the real resolver) must never be
 * connected to, and each refusal is counted in /metrics by reason. With the address in
 * `outbound.allowPrivateAddresses` the same publish does connect, which shows the listener
 * below sees every connection attempt.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:net';
import { hostname } from 'node:os';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { until } from '../helpers/wait.js';
import { DeviceApi, WEB_INSTANCE, webToken } from './device-api-helpers.js';
import { nonPublicReason } from '../../src/net/outbound-guard.js';

const NAME = hostname();
const resolved = await lookup(NAME, { all: true }).catch(() => []);
const privateOnly = resolved.length > 0 && resolved.every((a) => nonPublicReason(a.address) !== undefined);
if (!privateOnly) console.warn(`outbound-guard.test: skipped: the host name ${NAME} does not resolve to private addresses only here (${JSON.stringify(resolved)})`);

/** An internal TCP service that counts the connections it gets (TLS ClientHellos or HTTP requests). */
class InternalService {
  connections = 0;
  readonly server: Server = createServer((socket) => {
    this.connections++;
    socket.destroy();
  });
  port = 0;

  async start(address: string): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, address, resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function metrics(herald: HeraldProcess): Promise<Map<string, number>> {
  return parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
}

/** Registers a web device on `endpoint` with interest `interest` and publishes to it with a webhookUrl. */
async function publishTo(herald: HeraldProcess, endpoint: string, webhookUrl: string, interest: string): Promise<void> {
  const api = new DeviceApi(herald.baseUrl, WEB_INSTANCE.instanceId);
  // A host name is accepted at registration: what it resolves to is checked when Herald connects.
  const id = await api.registerOk('web', webToken(interest, { endpoint }));
  expect((await api.replaceInterests('web', id, [interest])).status).toBe(200);
  const res = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${WEB_INSTANCE.instanceId}/publishes/interests`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${WEB_INSTANCE.secretKey}` },
    body: JSON.stringify({ interests: [interest], web: { notification: { title: 'hello' } }, webhookUrl }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
}

describe.skipIf(!privateOnly)(`outbound connections to a host name that resolves to ${resolved[0]?.address ?? '?'}`, () => {
  let pushService: InternalService;
  let receiver: InternalService;
  const heralds: HeraldProcess[] = [];

  beforeAll(async () => {
    pushService = await new InternalService().start(resolved[0]!.address);
    receiver = await new InternalService().start(resolved[0]!.address);
  });

  afterAll(async () => {
    await Promise.all(heralds.map((h) => h.dispose()));
    await pushService?.close();
    await receiver?.close();
  });

  it('never connects to it, and counts each refusal by reason', async () => {
    const herald = await startHerald({ config: { push: [WEB_INSTANCE] } });
    heralds.push(herald);
    await publishTo(herald, `https://${NAME}:${pushService.port}/push/ssrf`, `http://${NAME}:${receiver.port}/hook`, 'ssrf');
    const reason = nonPublicReason(resolved[0]!.address)!;
    // Both attempts are over once the notification has an outcome and the publish's webhook is refused.
    let outcomes = 0;
    await until(
      async () => {
        const m = await metrics(herald);
        outcomes = series(m, 'herald_push_notifications_total', { gateway: 'web' }) + Math.min(1, series(m, 'herald_outbound_refusals_total', { client: 'webhook' }));
        return outcomes >= 2;
      },
      () => `the notification's outcome and the webhook's refusal (${outcomes} of 2)`,
      20_000,
    );
    expect(outcomes).toBe(2);
    expect(pushService.connections).toBe(0);
    expect(receiver.connections).toBe(0);
    const m = await metrics(herald);
    expect(series(m, 'herald_outbound_refusals_total', { client: 'web_push', reason })).toBeGreaterThanOrEqual(1);
    expect(series(m, 'herald_outbound_refusals_total', { client: 'webhook', reason })).toBeGreaterThanOrEqual(1);
    // Refused once, not retried: the notification failed with the reason, the device is kept.
    expect(series(m, 'herald_push_notifications_total', { gateway: 'web', result: 'failed' })).toBe(1);
    expect([...m.keys()].some((k) => k.startsWith('herald_push_notifications_total') && k.includes('EndpointNotAllowed'))).toBe(true);
  });

  it('connects when the operator allows the address (outbound.allowPrivateAddresses)', async () => {
    const herald = await startHerald({ config: { push: [WEB_INSTANCE], outbound: { allowPrivateAddresses: resolved.map((a) => a.address) } } });
    heralds.push(herald);
    await publishTo(herald, `https://${NAME}:${pushService.port}/push/allowed`, `http://${NAME}:${receiver.port}/hook`, 'allowed');
    await until(() => pushService.connections > 0 && receiver.connections > 0, 'connections to the allowed internal services', 20_000);
    const m = await metrics(herald);
    expect(series(m, 'herald_outbound_refusals_total')).toBe(0);
  });
});
