/**
 * One webhook POST (a 1 KiB signed-looking body) to a local keep-alive HTTP receiver answering
 * 200: the WebhookSender (node:http over a keep-alive agent) for a receiver from the config,
 * the same through the OutboundGuard agent (a per-publish webhookUrl, by name: `localhost`
 * allowed), and the reference it replaced, node's fetch (undici) with `redirect: 'manual'`.
 * Sequential requests: the figure is the per-request cost, not the receiver's capacity.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebhookSender } from '../../src/webhooks/http-sender.js';
import type { MicroSuite } from '../micro-suite.js';

export const suite: MicroSuite = {
  source: 'src/webhooks/http-sender.ts',
  async setup(bench) {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const body = JSON.stringify({ time_ms: Date.now(), events: [{ name: 'channel_occupied', channel: 'x'.repeat(900) }] });
    const headers = { 'Content-Type': 'application/json', 'X-Pusher-Key': 'key', 'X-Pusher-Signature': 'f'.repeat(64) };
    const sender = new WebhookSender(['127.0.0.1', '::1']);
    const never = new AbortController().signal;
    const byAddress = { url: `http://127.0.0.1:${port}/hook`, body, headers };
    const byName = { url: `http://localhost:${port}/hook`, body, headers };
    const check = async (promise: Promise<{ ok: boolean }>): Promise<void> => {
      if (!(await promise).ok) throw new Error('webhook POST failed');
    };
    await check(sender.post(byName, true, 5000, never));
    bench
      .add('WebhookSender.post (config receiver, keep-alive)', () => check(sender.post(byAddress, false, 5000, never)))
      .add('WebhookSender.post guarded (webhookUrl by name, allowed)', () => check(sender.post(byName, true, 5000, never)))
      .add('reference: fetch (undici), redirect manual', async () => {
        const res = await fetch(byAddress.url, { method: 'POST', body, headers, redirect: 'manual', signal: AbortSignal.timeout(5000) });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
      });
    return {
      teardown: async () => {
        sender.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  },
};
