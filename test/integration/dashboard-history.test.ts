/**
 * The dashboard's channel page for history channels (apps[].history): the admin route
 * `GET /admin/v1/apps/<appId>/channels/<channel>` through fetch (the same kept events as the
 * signed history API, data cut to a preview, the channel's subscribers, a non-history channel
 * named as such), and the page in a real Chromium on a laptop and a phone screen (last events
 * newest first with their serials, Refresh, the note for a channel without history).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { HeraldProcess, appConfig, startHerald } from '../helpers/herald-process.js';
import { adminRequest } from '../helpers/admin-client.js';
import { CHROMIUM_PATH, chromiumAvailable, collectErrors, launchChromium, wordsBrokenIn } from '../helpers/browser.js';
import { channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'dashboard-history-token-0123456789';
const LAPTOP = { width: 1280, height: 860 };
const PHONE = { width: 390, height: 844 };
const APP = { id: 'hist-app', key: 'hist-key', secret: 'hist-secret' };
const PLAIN = { id: 'plain-app', key: 'plain-key', secret: 'plain-secret' };
/** Longer than the page's preview (200 characters). */
const LONG_DATA = JSON.stringify({ text: 'x'.repeat(989) }); // 1,000 bytes

interface KeptEventView {
  serial: string;
  event: string;
  publishedAt: string;
  data: string;
  dataBytes: number;
  dataTruncated: boolean;
}

interface ChannelViewBody {
  channel: string;
  occupied: boolean;
  subscriptionCount?: number;
  userCount?: number;
  historyChannels: string[] | null;
  history: { maxEvents: number; ttlSeconds: number; complete: boolean; events: KeptEventView[] } | null;
}

let herald: HeraldProcess;
const clients: PusherJsClient[] = [];

async function channelView(appId: string, channel: string, query = ''): Promise<ChannelViewBody> {
  const res = await adminRequest(herald.baseUrl, TOKEN, `/apps/${encodeURIComponent(appId)}/channels/${encodeURIComponent(channel)}${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as ChannelViewBody;
}

beforeAll(async () => {
  herald = await startHerald({
    config: {
      admin: { token: TOKEN },
      apps: [appConfig({ ...APP, history: { channels: ['history-*', 'presence-history-*'], maxEvents: 20, ttlSeconds: 300 } }), appConfig({ ...PLAIN })],
    },
  });
  const sdk = channelsSdk(herald.port, APP);
  await sdk.trigger('history-room', 'order-placed', { id: 1 });
  await sdk.trigger('history-room', 'long-one', LONG_DATA);
  await sdk.trigger('history-room', 'emoji', `a${'😀'.repeat(150)}`);
});

afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

afterAll(async () => {
  await herald?.dispose();
});

describe('admin route GET /admin/v1/apps/<appId>/channels/<channel>', () => {
  it("answers a history channel's last kept events as the history API keeps them, data cut to a preview", async () => {
    const view = await channelView(APP.id, 'history-room');
    const api = (await (await channelsSdk(herald.port, APP).get({ path: '/channels/history-room/history' })).json()) as {
      events: { serial: string; event: string; data: string; published_at: number }[];
    };
    expect(api.events.map((e) => e.event)).toEqual(['order-placed', 'long-one', 'emoji']);
    expect(view.channel).toBe('history-room');
    expect(view.historyChannels).toEqual(['history-*', 'presence-history-*']);
    expect(view.history).toMatchObject({ maxEvents: 20, ttlSeconds: 300, complete: true });
    const events = view.history!.events;
    expect(events.map((e) => [e.serial, e.event, Date.parse(e.publishedAt)])).toEqual(api.events.map((e) => [e.serial, e.event, e.published_at]));
    expect(events[0]).toMatchObject({ data: '{"id":1}', dataBytes: 8, dataTruncated: false });
    expect(events[1]).toMatchObject({ data: LONG_DATA.slice(0, 200), dataBytes: LONG_DATA.length, dataTruncated: true });
    // Cut between characters, never inside a surrogate pair: 'a' and 99 emoji (199 UTF-16 units).
    expect(events[2]).toMatchObject({ data: `a${'😀'.repeat(99)}`, dataBytes: 601, dataTruncated: true });
  });

  it('answers the newest `limit` events, complete false when older ones are kept', async () => {
    const view = await channelView(APP.id, 'history-room', '?limit=2');
    expect(view.history!.events.map((e) => e.event)).toEqual(['long-one', 'emoji']);
    expect(view.history!.complete).toBe(false);
    for (const limit of ['0', '501', 'x']) {
      const res = await adminRequest(herald.baseUrl, TOKEN, `/apps/${APP.id}/channels/history-room?limit=${limit}`);
      expect(res.status, limit).toBe(400);
    }
  });

  it("counts the channel's subscribers, and a presence history channel's members", async () => {
    const client = pusherJsClient(herald.port, APP.key);
    clients.push(client);
    client.subscribe('history-room');
    await until(async () => (await channelView(APP.id, 'history-room')).subscriptionCount === 1, 'the subscriber counted');
    const empty = await channelView(APP.id, 'history-empty');
    expect(empty).toMatchObject({ occupied: false, subscriptionCount: 0, history: { events: [], complete: true } });
    const presence = await channelView(APP.id, 'presence-history-room');
    expect(presence).toMatchObject({ userCount: 0, history: { events: [] } });
    expect(presence.subscriptionCount).toBeUndefined();
  });

  it('answers history null for a channel no pattern names, and for an app without history', async () => {
    expect(await channelView(APP.id, 'orders')).toMatchObject({ historyChannels: ['history-*', 'presence-history-*'], history: null });
    expect(await channelView(PLAIN.id, 'history-room')).toMatchObject({ historyChannels: null, history: null });
  });

  it('refuses a request without the token, an unknown app and a channel name that is not one', async () => {
    expect((await fetch(`${herald.baseUrl}/admin/v1/apps/${APP.id}/channels/history-room`)).status).toBe(401);
    expect((await adminRequest(herald.baseUrl, TOKEN, '/apps/no-such-app/channels/history-room')).status).toBe(404);
    expect((await adminRequest(herald.baseUrl, TOKEN, `/apps/${APP.id}/channels/${encodeURIComponent('bad name!')}`)).status).toBe(400);
  });
});

describe.skipIf(process.env.HERALD_SKIP_BROWSER === '1')('channel page in Chromium', () => {
  let browser: Browser;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    if (!chromiumAvailable()) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: apt-get install -y chromium (or HERALD_SKIP_BROWSER=1 to skip these tests)`);
    browser = await launchChromium();
  }, 60_000);

  afterEach(async () => {
    await context?.close();
    context = undefined;
  });

  afterAll(async () => {
    await browser?.close();
  });

  async function signedInPage(path: string, viewport: { width: number; height: number }): Promise<{ page: Page; errors: string[] }> {
    context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const errors = collectErrors(page);
    await page.goto(`${herald.baseUrl}${path}#token=${TOKEN}`);
    return { page, errors };
  }

  async function noHorizontalScroll(page: Page): Promise<void> {
    // Evaluated in the page (a string: this file is compiled without the DOM types).
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    expect(overflow).toBeLessThanOrEqual(0);
  }

  for (const [screen, viewport] of [['laptop', LAPTOP], ['phone', PHONE]] as const) {
    it(`shows the last kept events newest first with their serials, and Refresh shows a new one (${screen})`, async () => {
      const { page, errors } = await signedInPage(`/dashboard/apps/${APP.id}/channels/history-room`, viewport);
      const kept = page.locator('li.kept-event');
      // Newest first: the laptop's run added an event before the phone's.
      const events = (await channelView(APP.id, 'history-room')).history!.events.reverse();
      await until(async () => (await kept.count()) === events.length, 'the kept events');
      expect(await kept.evaluateAll((items) => items.map((li) => li.getAttribute('data-serial')))).toEqual(events.map((e) => e.serial));
      expect(await kept.first().locator('.kept-name').textContent()).toBe(events[0]!.event);
      expect(await kept.first().locator('.kept-serial').textContent()).toContain(events[0]!.serial);
      const long = page.locator(`li[data-serial="${events.find((e) => e.event === 'long-one')!.serial}"]`);
      expect(await long.locator('.kept-data').textContent()).toBe(`${LONG_DATA.slice(0, 200)} … (1,000 bytes in all)`);
      await noHorizontalScroll(page);
      expect(await wordsBrokenIn(page, 'th, button, .kept-name, .kept-head time'), screen).toEqual([]);

      const sdk = channelsSdk(herald.port, APP);
      await sdk.trigger('history-room', `after-load-${screen}`, { screen });
      // Not on a timer: only Refresh shows it.
      await page.getByRole('button', { name: 'Refresh' }).click();
      await until(async () => (await kept.first().locator('.kept-name').textContent()) === `after-load-${screen}`, 'the new event at the top after Refresh');
      expect(await kept.first().locator('.kept-data').textContent()).toBe(JSON.stringify({ screen }));
      await noHorizontalScroll(page);
      expect(errors).toEqual([]);
    });

    it(`says that a channel keeps no history and names apps[].history (${screen})`, async () => {
      const { page, errors } = await signedInPage(`/dashboard/apps/${APP.id}/channels/orders`, viewport);
      const note = page.getByRole('status');
      await until(async () => (await note.textContent())?.includes('This channel keeps no history') === true, 'the no-history note');
      expect(await note.textContent()).toContain('apps[].history');
      expect(await note.textContent()).toContain('history-*');
      expect(await page.locator('li.kept-event').count()).toBe(0);
      await noHorizontalScroll(page);

      await page.goto(`${herald.baseUrl}/dashboard/apps/${PLAIN.id}/channels/history-room`);
      await until(async () => (await page.getByRole('status').textContent())?.includes('the app keeps none') === true, "the no-history note of an app without history");
      expect(await page.getByRole('status').textContent()).toContain('apps[].history');
      expect(errors).toEqual([]);
    });
  }

  it("opens a channel's page from the app page: an occupied channel's row, or any channel by name", async () => {
    const client = pusherJsClient(herald.port, APP.key);
    clients.push(client);
    client.subscribe('history-room');
    const { page, errors } = await signedInPage(`/dashboard/apps/${APP.id}`, LAPTOP);
    await page.getByRole('link', { name: 'history-room' }).click();
    await page.getByRole('heading', { name: 'Channel history-room' }).waitFor();
    await until(async () => (await page.locator('li.kept-event').count()) >= 3, 'the kept events');
    await until(async () => (await page.locator('.stat', { hasText: 'Subscribers' }).locator('.stat-value').textContent()) === '1', 'the subscriber count');

    await page.getByRole('link', { name: APP.id }).click();
    await page.getByLabel('Open a channel').fill('history-quiet');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await page.getByRole('heading', { name: 'Channel history-quiet' }).waitFor();
    await until(async () => (await page.locator('li.empty').textContent())?.includes('No kept events') === true, 'the empty history');
    expect(errors).toEqual([]);
  });
});
