/**
 * The dashboard in a real Chromium against the built server: sign-in, the overview with its
 * front-end threads (one, and two with a pusher-js client on each), the app view with
 * pusher-js clients and the `pusher` SDK, the event creator, the push view with a publish
 * through the Beams SDK (fake gateways) and a test notification to one device id, with no
 * page errors, on a laptop and a phone screen.
 * `HERALD_SCREENSHOTS=1` also refreshes the screenshots in docs/ (one per view, each shown in the
 * README: the last test checks that), so they are retaken whenever a view changes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { DEFAULT_APP, DEFAULT_PUSH, HeraldProcess, REPO_ROOT, startHerald } from '../helpers/herald-process.js';
import { CHROMIUM_PATH, chromiumAvailable, collectErrors, launchChromium, wordsBrokenIn } from '../helpers/browser.js';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { beamsSdk, channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { ClientPool } from '../helpers/channel-clients.js';
import { flushedBy, until } from '../helpers/wait.js';

const TOKEN = 'dashboard-test-token-0123456789';
const SCREENSHOTS = process.env.HERALD_SCREENSHOTS === '1';
const LAPTOP = { width: 1280, height: 860 };
const PHONE = { width: 390, height: 844 };
/** A second instance with FCM credentials only: APNs and web push devices fail with "no credentials". */
const FCM_ONLY = { instanceId: '5b0f6a4e-2c1d-4e8f-9a3b-7c6d5e4f3a21', secretKey: 'fcm-only-secret' };

let herald: HeraldProcess;
let fakes: FakeGateways;
let browser: Browser;
let context: BrowserContext | undefined;
const clients: PusherJsClient[] = [];

/** A page with the token already in sessionStorage (set through the `#token=` sign-in link). */
async function signedInPage(path: string, viewport = LAPTOP, colorScheme: 'light' | 'dark' = 'light'): Promise<{ page: Page; errors: string[] }> {
  context = await browser.newContext({ viewport, colorScheme });
  const page = await context.newPage();
  const errors = collectErrors(page);
  await page.goto(`${herald.baseUrl}${path}#token=${TOKEN}`);
  return { page, errors };
}

/** Page errors, less the browser's own log line for the 401 a wrong sign-in is meant to get. */
function realErrors(errors: string[]): string[] {
  return errors.filter((e) => !/Failed to load resource: the server responded with a status of 401/.test(e));
}

/** The views this file screenshots (docs/dashboard-<name>.png). */
const screenshotNames = new Set<string>();

async function screenshot(page: Page, name: string): Promise<void> {
  screenshotNames.add(name);
  if (SCREENSHOTS) await page.screenshot({ path: join(REPO_ROOT, 'docs', `dashboard-${name}.png`), fullPage: false });
}

async function noHorizontalScroll(page: Page): Promise<void> {
  // Evaluated in the page (a string: this file is compiled without the DOM types).
  const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  expect(overflow).toBeLessThanOrEqual(0);
}

/**
 * The chart's x-axis tick labels, as drawn, are times of day within ten minutes of now
 * ("23:41:05"), not years: uPlot's own range for zero or one point spans years.
 */
async function expectTimeOfDayTicks(page: Page, label: string): Promise<void> {
  const chart = page.locator(`.chart[aria-label="${label}"]`);
  await until(async () => (await chart.getAttribute('data-x-ticks')) !== null, `the ${label} chart's tick labels`);
  const ticks = JSON.parse((await chart.getAttribute('data-x-ticks'))!) as string[];
  expect(ticks.length, label).toBeGreaterThan(0);
  const now = (await page.evaluate('(() => { const d = new Date(); return d.getHours() * 3600 + d.getMinutes() * 60 + d.getSeconds(); })()')) as number;
  for (const tick of ticks) {
    const m = /^(\d\d):(\d\d):(\d\d)$/.exec(tick);
    expect(m, `${label}: ${ticks.join(', ')}`).not.toBeNull();
    const apart = Math.abs(Number(m![1]) * 3600 + Number(m![2]) * 60 + Number(m![3]) - now);
    expect(Math.min(apart, 86_400 - apart), `${label}: ${tick}`).toBeLessThan(600);
  }
}

/** The overview's front-end threads table, a row of cell texts per thread (thread, connections, share). */
async function threadRows(page: Page): Promise<string[][]> {
  const rows = page.locator('table.front-end-threads tbody tr');
  return Promise.all((await rows.all()).map(async (row) => (await row.locator('td').allTextContents()).map((t) => t.trim())));
}

async function connectClient(): Promise<PusherJsClient> {
  const client = pusherJsClient(herald.port, DEFAULT_APP.key);
  clients.push(client);
  await until(() => client.connection.state === 'connected', 'a pusher-js connection');
  return client;
}

describe.skipIf(process.env.HERALD_SKIP_BROWSER === '1')('dashboard in Chromium', () => {
  beforeAll(async () => {
    if (!chromiumAvailable()) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: apt-get install -y chromium (or HERALD_SKIP_BROWSER=1 to skip these tests)`);
    fakes = await startFakeGateways();
    [herald, browser] = await Promise.all([
      startHerald({
        config: {
          frontEndThreads: 1,
          admin: { token: TOKEN },
          apps: [{ ...DEFAULT_APP }],
          push: [{ ...DEFAULT_PUSH, ...fakes.instanceConfig() }, { ...FCM_ONLY, ...fakes.instanceConfig(), apns: null, web: null }],
        },
      }),
      launchChromium(),
    ]);
  }, 60_000);

  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    await context?.close();
    context = undefined;
  });

  afterAll(async () => {
    await browser?.close();
    await herald?.dispose();
    await fakes?.stop();
  });

  it('refuses a wrong admin token and accepts the right one', async () => {
    context = await browser.newContext({ viewport: LAPTOP });
    const page = await context.newPage();
    const errors = collectErrors(page);
    await page.goto(`${herald.baseUrl}/dashboard`);
    await page.getByLabel('Admin token').fill('not-the-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await until(async () => (await page.getByRole('alert').textContent())?.includes('Wrong admin token'), "the 'Wrong admin token' alert");
    await page.getByLabel('Admin token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    // The token is kept for the tab: a reload stays signed in.
    await page.reload();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: DEFAULT_APP.id }).waitFor();
    // Secrets are masked on the page.
    expect(await page.content()).not.toContain(DEFAULT_APP.secret);
    await page.getByRole('cell', { name: 'up', exact: true }).first().waitFor();
    // One front-end thread, holding no connection yet.
    const threads = page.locator('section[aria-label="Front-end threads"]');
    await threads.locator('[data-threads="1"]').waitFor();
    expect(await threadRows(page)).toEqual([['0', '0', '–']]);
    // The charts open on the last minute, not on years (uPlot's own range for 0 or 1 point).
    for (const label of ['messages per second', 'push notifications per second']) {
      const chart = page.locator(`.chart[aria-label="${label}"]`);
      await until(async () => (await chart.getAttribute('data-x-max')) !== null, `the ${label} chart's x range`);
      const [min, max] = [Number(await chart.getAttribute('data-x-min')), Number(await chart.getAttribute('data-x-max'))];
      expect(max - min, label).toBeLessThanOrEqual(600);
      expect(Math.abs(max - Date.now() / 1000), label).toBeLessThan(600);
      await expectTimeOfDayTicks(page, label);
    }
    await screenshot(page, 'overview');
    expect(realErrors(errors)).toEqual([]);
  });

  it('shows two front-end threads and the connections on each, a pusher-js client placed on each', async () => {
    const threaded = await startHerald({ config: { frontEndThreads: 2, admin: { token: TOKEN }, apps: [{ ...DEFAULT_APP }] } });
    const pool = new ClientPool(DEFAULT_APP);
    try {
      await pool.connectOnThread(threaded, 0);
      await pool.connectOnThread(threaded, 1);
      context = await browser.newContext({ viewport: LAPTOP });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${threaded.baseUrl}/dashboard#token=${TOKEN}`);
      await page.locator('section[aria-label="Front-end threads"] [data-threads="2"]').waitFor();
      // The page polls the overview: wait for the answer that counts both clients.
      await until(async () => (await threadRows(page)).map((r) => r[1]).join() === '1,1', 'one connection shown on each thread');
      expect(await threadRows(page)).toEqual([
        ['0', '1', '50 %'],
        ['1', '1', '50 %'],
      ]);
      expect(realErrors(errors)).toEqual([]);
    } finally {
      pool.disconnectAll();
      await threaded.dispose();
    }
  });

  it('shows pusher-js connections, their channel and an event triggered with the pusher SDK', async () => {
    const { page, errors } = await signedInPage(`/dashboard/apps/${DEFAULT_APP.id}`);
    await page.getByRole('heading', { name: `App ${DEFAULT_APP.id}` }).waitFor();
    // The console is live once its stream is open (the dot turns green).
    await page.locator('h2 .dot.ok').waitFor();
    const [a, b] = await Promise.all([connectClient(), connectClient()]);
    const [ordersA, ordersB] = [a.subscribe('orders'), b.subscribe('orders')];
    await until(() => ordersA.subscribed && ordersB.subscribed, 'both clients subscribed to orders');
    await page.locator('tr[data-channel="orders"]').getByText('2 subscriber(s)').waitFor({ timeout: 15_000 });
    await page.locator('.console li.subscription', { hasText: 'Subscribed orders' }).first().waitFor();
    await page.locator('.console li.connection', { hasText: 'Connection opened' }).first().waitFor();

    await channelsSdk(herald.port, DEFAULT_APP).trigger('orders', 'order-placed', { id: 42, item: 'tea' });
    const entry = page.locator('.console li.api_event', { hasText: 'order-placed' });
    await entry.waitFor();
    expect(await entry.textContent()).toContain('"item":"tea"');

    // Filter by kind: hiding API events hides the entry.
    await page.getByLabel('API events').uncheck();
    await entry.waitFor({ state: 'detached' });
    await page.getByLabel('API events').check();
    // Filter by channel: another channel's event is hidden.
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    await sdk.trigger('elsewhere', 'other-event', {});
    await page.locator('.console li', { hasText: 'other-event' }).waitFor();
    await page.getByLabel('Filter by channel').fill('orders');
    await page.locator('.console li', { hasText: 'other-event' }).waitFor({ state: 'detached' });
    await entry.waitFor();
    await page.getByLabel('Filter by channel').fill('');
    // Paused: events that happen meanwhile are not shown.
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText('Paused').waitFor();
    await sdk.trigger('orders', 'while-paused', {});
    // The server wrote the event's debug entry to the page's stream before answering the trigger;
    // a connection opened after it shows in a later `stats` event of that stream (the Connections
    // card): once the card counts it, the page has had (and not shown) the paused event.
    const connectionsCard = page.locator('.stat', { hasText: 'Connections' }).locator('.stat-value');
    await flushedBy(connectClient, async () => (await connectionsCard.textContent()) === String(clients.length), "the stream's stats after the paused event");
    expect(await page.locator('.console li', { hasText: 'while-paused' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Resume' }).click();
    await sdk.trigger('orders', 'after-resume', {});
    await page.locator('.console li', { hasText: 'after-resume' }).waitFor();
    await screenshot(page, 'app');
    expect(realErrors(errors)).toEqual([]);
  });

  it('sends an event from the event creator that a pusher-js client receives', async () => {
    const { page, errors } = await signedInPage(`/dashboard/apps/${DEFAULT_APP.id}`);
    const client = await connectClient();
    let received: unknown;
    client.subscribe('news').bind('headline', (data: unknown) => (received = data));
    await page.getByLabel('Channel', { exact: true }).fill('news');
    await page.getByLabel('Event', { exact: true }).fill('headline');
    await page.getByLabel('Data', { exact: true }).fill('{"title":"Herald ships a dashboard"}');
    // The subscription must be in place before the event goes out.
    await page.locator('tr[data-channel="news"]').waitFor({ timeout: 15_000 });
    await page.getByRole('button', { name: 'Send event' }).click();
    expect(await until(() => received, 'headline on news in pusher-js')).toEqual({ title: 'Herald ships a dashboard' });
    await page.getByText('Sent headline to news.').waitFor();
    expect(realErrors(errors)).toEqual([]);
  });

  it('shows a publish made with the Beams SDK, with its state, in the push view', async () => {
    const devices = `${herald.baseUrl}/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/devices/fcm`;
    const created = await fetch(devices, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: 'fcm-dashboard-token' }) });
    expect(created.status).toBe(200);
    const { id } = (await created.json()) as { id: string };
    const interests = await fetch(`${devices}/${encodeURIComponent(id)}/interests`, {
      method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ interests: ['dashboard'] }),
    });
    expect(interests.status).toBe(200);
    const { publishId } = await beamsSdk(herald.port).publishToInterests(['dashboard'], { fcm: { notification: { title: 'Hi', body: 'From Beams' } } });

    const { page, errors } = await signedInPage(`/dashboard/push/${DEFAULT_PUSH.instanceId}`);
    const row = page.locator(`li.publish[data-publish-id="${publishId}"]`);
    await row.locator('[data-state="finished"]').waitFor({ timeout: 20_000 });
    expect(await row.locator('table.gateways').textContent()).toMatch(/fcm\s*1\s*1\s*0/);
    await page.locator('section[aria-label="Devices"]').getByText('FCM').waitFor();
    await screenshot(page, 'push');

    // The test notification form, to that one device by its id.
    await page.getByLabel('Send to').selectOption('deviceId');
    await page.getByLabel('Device id', { exact: true }).fill(id);
    await page.getByLabel('Title', { exact: true }).fill('Browser to device');
    await page.getByRole('button', { name: 'Send test notification' }).click();
    const status = page.getByRole('status').filter({ hasText: 'Published pubid-' });
    await status.waitFor({ timeout: 15_000 });
    const testId = /pubid-[0-9a-f-]+/.exec((await status.textContent()) ?? '')![0];
    const testRow = page.locator(`li.publish[data-publish-id="${testId}"]`);
    await testRow.locator('[data-state="finished"]').waitFor({ timeout: 20_000 });
    expect(await testRow.locator('table.gateways').textContent()).toMatch(/fcm\s*1\s*1\s*0/);
    const delivered = fakes.fcm.received.filter((r) => (r.message['notification'] as { title?: string } | undefined)?.title === 'Browser to device');
    expect(delivered.map((r) => r.token)).toEqual(['fcm-dashboard-token']);
    expect(realErrors(errors)).toEqual([]);
  });

  it('shows each gateway\'s failure reasons and flags the platforms an instance has no credentials for', async () => {
    const devices = `${herald.baseUrl}/device_api/v1/instances/${FCM_ONLY.instanceId}/devices/apns`;
    const created = await fetch(devices, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: 'ab'.repeat(32), bundleIdentifier: 'com.herald.dashboard' }),
    });
    expect(created.status).toBe(200);
    const { id } = (await created.json()) as { id: string };
    const interests = await fetch(`${devices}/${encodeURIComponent(id)}/interests`, {
      method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ interests: ['no-creds'] }),
    });
    expect(interests.status).toBe(200);
    const { publishId } = await beamsSdk(herald.port, FCM_ONLY.instanceId, FCM_ONLY.secretKey).publishToInterests(['no-creds'], {
      apns: { aps: { alert: { title: 'Hi', body: 'To nowhere' } } },
    });

    const { page, errors } = await signedInPage(`/dashboard/push/${FCM_ONLY.instanceId}`);
    const note = page.getByRole('note');
    await note.waitFor();
    expect(await note.getAttribute('data-missing-credentials')).toBe('apns web');
    expect(await note.textContent()).toContain('No credentials for APNs, Web push');
    const row = page.locator(`li.publish[data-publish-id="${publishId}"]`);
    await row.locator('[data-state="finished"]').waitFor({ timeout: 20_000 });
    expect(await row.locator('table.gateways').textContent()).toMatch(/apns\s*1\s*0\s*1\s*0/);
    expect(await row.getByRole('list', { name: 'Failure reasons' }).textContent()).toBe('1 failed on apns: no credentials for apns');
    await screenshot(page, 'push-failures');
    // The instance with every credential has no such note.
    await page.goto(`${herald.baseUrl}/dashboard/push/${DEFAULT_PUSH.instanceId}`);
    await page.locator('section[aria-label="Devices"]').waitFor();
    expect(await page.getByRole('note').count()).toBe(0);
    expect(realErrors(errors)).toEqual([]);
  });

  it('fits a phone screen without horizontal scrolling, in dark mode too', async () => {
    for (const path of ['/dashboard', `/dashboard/apps/${DEFAULT_APP.id}`, `/dashboard/push/${DEFAULT_PUSH.instanceId}`]) {
      const { page, errors } = await signedInPage(path, PHONE, 'dark');
      // Loaded: the stat cards are filled from the API.
      await page.locator('.stats .stat').first().waitFor();
      if (path.includes('/push/')) await page.locator('table.gateways').first().waitFor();
      await noHorizontalScroll(page);
      expect(await wordsBrokenIn(page, 'th, button'), path).toEqual([]);
      if (path === '/dashboard') await expectTimeOfDayTicks(page, 'push notifications per second');
      const background = (await page.evaluate('getComputedStyle(document.body).backgroundColor')) as string;
      expect(background).not.toBe('rgb(246, 247, 249)');
      if (path === '/dashboard') await screenshot(page, 'phone-dark');
      expect(realErrors(errors)).toEqual([]);
      await context?.close();
      context = undefined;
    }
  });

  it('has each view it screenshots in docs/ and shown in the README (HERALD_SCREENSHOTS=1 refreshes them)', () => {
    expect([...screenshotNames].sort()).toEqual(['app', 'overview', 'phone-dark', 'push', 'push-failures']);
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    for (const name of screenshotNames) {
      expect(existsSync(join(REPO_ROOT, 'docs', `dashboard-${name}.png`)), name).toBe(true);
      expect(readme, name).toContain(`(docs/dashboard-${name}.png)`);
    }
  });
});
