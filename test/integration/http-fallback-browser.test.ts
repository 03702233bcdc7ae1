/**
 * pusher-js' HTTP fallback in a real Chromium against the built server, the page on another
 * origin (CORS with preflights): with `window.WebSocket` removed (pusher-js falls back to
 * xhr_streaming) and with `enabledTransports: ['xhr_polling']`. Public, private and presence
 * channels, events from the `pusher` SDK, client events both ways with a WebSocket client,
 * members coming and going, the member_removed and channel_vacated webhooks when the page
 * closes (its session expires), and a reconnect after a server restart.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DEFAULT_APP, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { CHROMIUM_PATH, chromiumAvailable, collectErrors, launchChromium } from '../helpers/browser.js';
import { channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { pageClientScript, startFallbackPage, type FallbackPage } from '../helpers/fallback-page.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { until } from '../helpers/wait.js';
import { freeStablePort } from '../helpers/redis-server.js';

const SESSION_TIMEOUT_MS = 3000;
const REMOVE_WEBSOCKET = 'delete window.WebSocket; window.WebSocket = undefined; delete window.MozWebSocket;';

let herald: HeraldProcess;
let receiver: WebhookReceiver;
let pageServer: FallbackPage;
let browser: Browser;
let context: BrowserContext | undefined;
const wsClients: PusherJsClient[] = [];

interface PageEvent {
  channel: string | null;
  event: string;
  data: unknown;
}

async function pageEvents(page: Page): Promise<PageEvent[]> {
  return (await page.evaluate('window.fb.events')) as PageEvent[];
}

async function pageEvent(page: Page, what: string, match: (e: PageEvent) => boolean): Promise<PageEvent> {
  let seen: PageEvent[] = [];
  return until(
    async () => (seen = await pageEvents(page)).find(match),
    () => `the page to receive ${what}; it has ${JSON.stringify(seen).slice(0, 2000)}`,
    15_000,
  );
}

async function openPage(options: Record<string, unknown>, removeWebSocket: boolean, user: string): Promise<{ page: Page; errors: string[] }> {
  context = await browser.newContext();
  if (removeWebSocket) await context.addInitScript(REMOVE_WEBSOCKET);
  const page = await context.newPage();
  const errors = collectErrors(page);
  await page.goto(pageServer.url);
  await page.evaluate(pageClientScript(herald.port, DEFAULT_APP.key, options, user));
  await page.waitForFunction('window.fb.client.connection.state === "connected"', undefined, { timeout: 20_000 });
  return { page, errors };
}

function wsClient(userId: string): Promise<PusherJsClient> {
  const sdk = channelsSdk(herald.port, DEFAULT_APP);
  const client = pusherJsClient(herald.port, DEFAULT_APP.key, {
    channelAuthorization: {
      endpoint: '',
      transport: 'ajax',
      customHandler: ({ socketId, channelName }, callback) => {
        const auth = channelName.startsWith('presence-') ? sdk.authorizeChannel(socketId, channelName, { user_id: userId, user_info: { name: userId } }) : sdk.authorizeChannel(socketId, channelName);
        callback(null, auth);
      },
    },
  });
  wsClients.push(client);
  return new Promise((resolve) => client.connection.bind('connected', () => resolve(client)));
}

function subscribed(client: PusherJsClient, channel: string): Promise<void> {
  return new Promise((resolve) => client.subscribe(channel).bind('pusher:subscription_succeeded', () => resolve()));
}

/** The whole tour for one transport; `tag` keeps channel names apart between tests. */
async function tour(tag: string, options: Record<string, unknown>, removeWebSocket: boolean, expectedTransport: string): Promise<void> {
  const user = `fb-user-${tag}`;
  const { page, errors } = await openPage(options, removeWebSocket, user);
  expect(await page.evaluate('window.fb.transport()')).toBe(expectedTransport);
  const pub = `fb-public-${tag}`;
  const priv = `private-fb-${tag}`;
  const presence = `presence-fb-${tag}`;
  for (const name of [pub, priv, presence]) await page.evaluate(`window.fb.subscribe(${JSON.stringify(name)})`);
  for (const name of [pub, priv, presence]) {
    await pageEvent(page, `subscription_succeeded on ${name}`, (e) => e.channel === name && e.event === 'pusher:subscription_succeeded');
  }

  // A WebSocket client joins the private and presence channels: the page sees the member come.
  const other = await wsClient(`ws-user-${tag}`);
  const fromPage: unknown[] = [];
  await subscribed(other, priv);
  other.channel(priv).bind('client-from-page', (data: unknown) => fromPage.push(data));
  await subscribed(other, presence);
  const added = await pageEvent(page, 'member_added', (e) => e.channel === presence && e.event === 'pusher:member_added');
  expect(added.data).toMatchObject({ id: `ws-user-${tag}` });
  expect(Object.keys((other.channel(presence) as unknown as { members: { members: Record<string, unknown> } }).members.members).sort()).toEqual([user, `ws-user-${tag}`].sort());

  // Events from the server SDK on every kind of channel.
  const sdk = channelsSdk(herald.port, DEFAULT_APP);
  await sdk.trigger([pub, priv, presence], 'server-event', { n: 1, tag });
  for (const name of [pub, priv, presence]) {
    const got = await pageEvent(page, `server-event on ${name}`, (e) => e.channel === name && e.event === 'server-event');
    expect(got.data).toEqual({ n: 1, tag });
  }

  // Client events both ways.
  expect(await page.evaluate(`window.fb.client.channel(${JSON.stringify(priv)}).trigger('client-from-page', { hello: 'ws' })`)).toBe(true);
  await until(() => fromPage.length === 1, 'the WebSocket client to get the page client event', 15_000);
  expect(fromPage[0]).toEqual({ hello: 'ws' });
  other.channel(presence).trigger('client-from-ws', { hello: 'page' });
  const fromWs = await pageEvent(page, 'client-from-ws', (e) => e.channel === presence && e.event === 'client-from-ws');
  expect(fromWs.data).toEqual({ hello: 'page' });

  // The WebSocket client leaves: the page sees the member go.
  other.unsubscribe(presence);
  const removed = await pageEvent(page, 'member_removed', (e) => e.channel === presence && e.event === 'pusher:member_removed');
  expect(removed.data).toMatchObject({ id: `ws-user-${tag}` });
  expect(errors).toEqual([]);

  // The page goes away without a word: its session expires, and it leaves its channels.
  await context!.close();
  context = undefined;
  await until(() => {
      const events = receiver.deliveredEvents();
      return (
        events.some((e) => e.name === 'member_removed' && e.channel === presence && e.user_id === user) &&
        events.some((e) => e.name === 'channel_vacated' && e.channel === presence) &&
        events.some((e) => e.name === 'channel_vacated' && e.channel === pub)
      );
    }, 'member_removed and channel_vacated webhooks after the page closed', SESSION_TIMEOUT_MS + 15_000);
}

describe.skipIf(process.env.HERALD_SKIP_BROWSER === '1')('pusher-js HTTP fallback in Chromium', () => {
  beforeAll(async () => {
    if (!chromiumAvailable()) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: apt-get install -y chromium (or HERALD_SKIP_BROWSER=1 to skip these tests)`);
    receiver = await WebhookReceiver.start();
    [herald, browser] = await Promise.all([
      startHerald({
        config: {
          apps: [{ ...DEFAULT_APP, clientEvents: true, userAuthentication: true, webhooks: [{ url: receiver.url() }] }],
          httpFallback: { sessionTimeoutMs: SESSION_TIMEOUT_MS },
        },
      }),
      launchChromium(),
    ]);
    pageServer = await startFallbackPage(channelsSdk(herald.port, DEFAULT_APP));
  }, 60_000);

  afterEach(async () => {
    for (const c of wsClients.splice(0)) c.disconnect();
    await context?.close();
    context = undefined;
  });

  afterAll(async () => {
    await browser?.close();
    await pageServer?.close();
    await herald?.dispose();
    await receiver?.close();
  });

  it('falls back to xhr_streaming when the page has no WebSocket', async () => {
    await tour('stream', {}, true, 'xhr_streaming');
  }, 90_000);

  it("works over xhr_polling (enabledTransports: ['xhr_polling'])", async () => {
    await tour('poll', { enabledTransports: ['xhr_polling'] }, false, 'xhr_polling');
  }, 90_000);

  it('reconnects after a server restart', async () => {
    // The same port after the restart (pusher-js is configured with it): one outside the
    // ephemeral range, which no outgoing connection can take while the server is down.
    await herald.stop();
    herald.port = await freeStablePort();
    await herald.start();
    const { page } = await openPage({}, true, 'fb-restart');
    const firstSocketId = (await page.evaluate('window.fb.client.connection.socket_id')) as string;
    await herald.stop();
    await page.waitForFunction('window.fb.client.connection.state !== "connected"', undefined, { timeout: 20_000 });
    await herald.start();
    // pusher-js' own backoff decides when it tries again (its strategy's timeouts grow to 60 s).
    await page.waitForFunction('window.fb.client.connection.state === "connected"', undefined, { timeout: 120_000 });
    expect(await page.evaluate('window.fb.client.connection.socket_id')).not.toBe(firstSocketId);
    await page.evaluate('window.fb.subscribe("fb-after-restart")');
    await pageEvent(page, 'subscription_succeeded after the restart', (e) => e.channel === 'fb-after-restart' && e.event === 'pusher:subscription_succeeded');
    await channelsSdk(herald.port, DEFAULT_APP).trigger('fb-after-restart', 'back', { ok: true });
    await pageEvent(page, 'an event after the restart', (e) => e.channel === 'fb-after-restart' && e.event === 'back');
  }, 180_000);
});
