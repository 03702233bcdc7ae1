/**
 * The dashboard's Apps and Push instances pages in a real Chromium against the built server:
 * create an app (its secret shown once, pusher-js connects with its key), edit its limits
 * (the refusals of a limit show on the page), disable it (its client closed with 4003), rotate
 * its secret, delete it with confirmation; create a push instance; the overview's apps a page at
 * a time with their total; no page errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { CHROMIUM_PATH, chromiumAvailable, collectErrors, launchChromium, wordsBrokenIn } from '../helpers/browser.js';
import { ClientPool, refusal } from '../helpers/channel-clients.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'dashboard-tenants-token-0123456789';
const FILE_APP = { id: 'file-app', key: 'file-key', secret: 'file-secret' };

let herald: HeraldProcess;
let browser: Browser;

function admin(path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${herald.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

/** Whether the element's top edge lies inside the viewport (to within a pixel: scrolling rounds). */
/** The aria-label of the section holding the focused element (an editor opened in place focuses its first field in an effect). */
async function focusedSection(page: Page): Promise<string | null> {
  return (await page.evaluate('document.activeElement?.closest("section")?.getAttribute("aria-label") ?? null')) as string | null;
}

async function inViewport(page: Page, selector: string): Promise<boolean> {
  return (await page.evaluate(`(() => {
    const el = document.querySelector(${JSON.stringify(selector)});
    if (!el) return false;
    const r = el.getBoundingClientRect();
    return r.top >= -1 && r.top < window.innerHeight && r.bottom > 0;
  })()`)) as boolean;
}

/** WCAG contrast ratio of two computed colours (`rgb(r, g, b)`). */
function contrast(a: string, b: string): number {
  const luminance = (css: string): number => {
    const [r, g, bl] = (css.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map(Number).map((c) => {
      const s = c / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * bl!;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi! + 0.05) / (lo! + 0.05);
}

describe.skipIf(process.env.HERALD_SKIP_BROWSER === '1')('dashboard Apps page in Chromium', () => {
  beforeAll(async () => {
    if (!chromiumAvailable()) throw new Error(`Chromium not found at ${CHROMIUM_PATH}: apt-get install -y chromium (or HERALD_SKIP_BROWSER=1 to skip these tests)`);
    [herald, browser] = await Promise.all([startHerald({ config: { admin: { token: TOKEN }, apps: [FILE_APP], push: [] } }), launchChromium()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await herald?.dispose();
  });

  it('creates, edits, disables, rotates and deletes an app, and creates a push instance', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const pool: ClientPool[] = [];
    try {
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${herald.baseUrl}/dashboard/apps#token=${TOKEN}`);
      await page.getByRole('heading', { name: 'Apps' }).waitFor();
      // The config file's app is listed, read-only.
      await page.locator('tr[data-app="file-app"]').getByText('edit in the config file').waitFor();

      await page.getByLabel('New app id').fill('ui-app');
      await page.getByLabel('New app key').fill('ui-key');
      await page.getByRole('button', { name: 'Create app' }).click();
      const created = await page.getByRole('status').textContent();
      const secret = /shown once\): ([0-9a-f]{32})/.exec(created ?? '')?.[1];
      expect(secret, String(created)).toBeDefined();
      const creds = { id: 'ui-app', key: 'ui-key', secret: secret! };
      const clients = new ClientPool(creds);
      pool.push(clients);
      const client = await clients.connect(herald);
      const row = page.locator('tr[data-app="ui-app"]');
      await row.waitFor();

      // Edit: maxEventsPerSecond 1, then go over it: the page shows the limit being hit.
      await row.getByRole('button', { name: 'Edit' }).click();
      await page.getByLabel('maxEventsPerSecond').fill('1');
      await page.getByRole('button', { name: 'Save' }).click();
      await until(
        async () => ((await (await admin('/apps?filter=ui-app')).json()) as { apps: { maxEventsPerSecond: number }[] }).apps[0]?.maxEventsPerSecond === 1,
        'the saved maxEventsPerSecond of 1',
      );
      const sdk = channelsSdk(herald.port, creds);
      await Promise.allSettled(Array.from({ length: 5 }, () => sdk.trigger('c', 'e', {})));
      await row.locator('.limits-hit').getByText(/maxEventsPerSecond: [1-9]/).waitFor({ timeout: 10_000 });

      // Disable: the pusher-js client is closed with 4003.
      await row.getByRole('button', { name: 'Disable' }).click();
      await until(() => client.errorCodes.includes(4003), 'the 4003 close');
      await row.getByText('disabled').waitFor();
      await row.getByRole('button', { name: 'Enable' }).click();
      await row.getByRole('button', { name: 'Disable' }).waitFor();

      // Rotate (no grace), in the form under the row: the old secret is refused, the new one shown.
      await row.getByRole('button', { name: 'Rotate secret' }).click();
      await page.getByLabel('Seconds the old secret stays valid').fill('0');
      await page.getByRole('button', { name: 'Rotate', exact: true }).click();
      await page.getByRole('status').getByText(/New secret of ui-app/).waitFor();
      const rotated = /shown once\): ([0-9a-f]{32})/.exec((await page.getByRole('status').textContent()) ?? '')?.[1];
      expect(rotated).toBeDefined();
      expect(rotated).not.toBe(secret);
      expect(await refusal(sdk.trigger('c', 'e', {}))).toMatchObject({ status: 401 });

      // Delete: a dismissed confirmation keeps it, an accepted one deletes it.
      page.once('dialog', (d) => void d.dismiss());
      await row.getByRole('button', { name: 'Delete' }).click();
      expect((await admin('/apps/ui-app')).status).toBe(200);
      page.once('dialog', (d) => void d.accept());
      await row.getByRole('button', { name: 'Delete' }).click();
      await row.waitFor({ state: 'detached' });
      expect((await admin('/apps/ui-app')).status).toBe(404);

      // Push instances.
      await page.getByRole('link', { name: 'Push instances' }).click();
      await page.getByRole('button', { name: 'Create push instance' }).click();
      const pushNotice = (await page.getByRole('status').textContent()) ?? '';
      const instanceId = /Instance ([0-9a-f-]{36}) created/.exec(pushNotice)?.[1];
      expect(instanceId, pushNotice).toBeDefined();
      await page.locator(`tr[data-instance="${instanceId}"]`).waitFor();
      // Push instances have no key: the filter says what it matches.
      expect(await page.getByLabel('Filter push instances').getAttribute('placeholder')).toBe('filter by instance id');

      // Edit: a limit and web push credentials (write-only); the list shows the platform.
      const pushRow = page.locator(`tr[data-instance="${instanceId}"]`);
      await pushRow.locator('.credentials').getByText('none').waitFor();
      await pushRow.getByRole('button', { name: 'Edit' }).click();
      await page.getByLabel('maxPublishesPerSecond').fill('7');
      const vapid = JSON.parse(readFileSync(join(REPO_ROOT, 'test/fixtures/vapid.json'), 'utf8')) as { publicKey: string; privateKey: string };
      await page.getByLabel('VAPID public key').fill(vapid.publicKey);
      await page.getByLabel('VAPID private key').fill(vapid.privateKey);
      await page.getByLabel('VAPID subject (mailto: or https: URL)').fill('mailto:ops@example.com');
      await page.getByRole('button', { name: 'Save' }).click();
      await pushRow.locator('.credentials').getByText('Web push').waitFor();
      const saved = (await (await admin(`/push/${instanceId}`)).json()) as { settings: { maxPublishesPerSecond: number; web: { vapidPrivateKey: string } } };
      expect(saved.settings.maxPublishesPerSecond).toBe(7);
      expect(saved.settings.web.vapidPrivateKey).not.toContain(vapid.privateKey.slice(0, 10));
      // Disable and enable, as apps.
      await pushRow.getByRole('button', { name: 'Disable' }).click();
      await pushRow.getByText('disabled').waitFor();
      expect(((await (await admin(`/push?filter=${instanceId}`)).json()) as { push: { enabled: boolean }[] }).push[0]!.enabled).toBe(false);
      await pushRow.getByRole('button', { name: 'Enable' }).click();
      await pushRow.getByRole('button', { name: 'Disable' }).waitFor();

      // The detail pages lead back to their lists.
      await page.goto(`${herald.baseUrl}/dashboard/apps/${FILE_APP.id}`);
      await page.locator('.crumbs').getByText(FILE_APP.id).waitFor();
      await page.locator('.crumbs').getByRole('link', { name: 'Apps' }).click();
      await page.getByRole('heading', { name: 'Apps' }).waitFor();
      await page.goto(`${herald.baseUrl}/dashboard/push/${instanceId}`);
      await page.locator('.crumbs').getByRole('link', { name: 'Push instances' }).click();
      await page.getByRole('heading', { name: 'Push instances' }).waitFor();
      expect(errors).toEqual([]);
    } finally {
      for (const p of pool) p.disconnectAll();
      await context.close();
    }
  });

  for (const viewport of [{ width: 1280, height: 860 }, { width: 390, height: 844 }]) {
    it(`keeps a list of 50 apps usable at ${viewport.width} px: Edit opens in view, Delete reads as danger, no word broken, a secret to copy`, async () => {
      const prefix = `long${viewport.width}-`;
      for (let i = 0; i < 50; i++) {
        const id = `${prefix}${String(i).padStart(2, '0')}`;
        expect((await admin('/apps', { method: 'POST', body: { id, key: `${id}-key` } })).status).toBe(201);
      }
      const context = await browser.newContext({ viewport });
      try {
        await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: herald.baseUrl });
        const page = await context.newPage();
        const errors = collectErrors(page);
        await page.goto(`${herald.baseUrl}/dashboard/apps#token=${TOKEN}`);
        await page.getByLabel('Filter apps').fill(prefix);
        const rows = page.locator(`tr[data-app^="${prefix}"]`);
        await until(async () => (await rows.count()) === 50, 'the 50 apps listed');
        const last = page.locator(`tr[data-app="${prefix}49"]`);

        // No button or header text is broken inside a word (a phone cut "Disable" in two).
        expect(await wordsBrokenIn(page, 'button, th')).toEqual([]);

        // Delete is a danger button whose text is readable: WCAG AA contrast of at least 4.5:1.
        const [color, background] = await last.getByRole('button', { name: 'Delete' }).evaluate((b) => {
          // Runs in the page (this file is compiled without the DOM types).
          const style = (globalThis as unknown as { getComputedStyle(e: unknown): { color: string; backgroundColor: string } }).getComputedStyle(b);
          return [style.color, style.backgroundColor];
        });
        expect(contrast(color, background), `${color} on ${background}`).toBeGreaterThanOrEqual(4.5);

        // Edit opens the form in view, under the row, its first field focused (the first app's
        // editor was 49 rows further down, below the list).
        await page.locator(`tr[data-app="${prefix}00"]`).getByRole('button', { name: 'Edit' }).click();
        await until(async () => inViewport(page, `section[aria-label="Edit ${prefix}00"]`), 'the first app\'s editor in the viewport');
        await until(async () => (await focusedSection(page)) === `Edit ${prefix}00`, 'the first app\'s editor focused');
        await page.getByRole('region', { name: `Edit ${prefix}00` }).getByRole('button', { name: 'Cancel' }).click();
        // The last app's, labelled for people.
        await last.getByRole('button', { name: 'Edit' }).click();
        const editor = page.getByRole('region', { name: `Edit ${prefix}49` });
        await editor.waitFor();
        await until(async () => inViewport(page, `section[aria-label="Edit ${prefix}49"]`), 'the editor in the viewport');
        await until(async () => (await focusedSection(page)) === `Edit ${prefix}49`, 'the last app\'s editor focused');
        await editor.getByLabel('HTTP requests per second').fill('5');
        await editor.getByRole('button', { name: 'Save' }).click();
        await until(
          async () => ((await (await admin(`/apps?filter=${prefix}49`)).json()) as { apps: { maxHttpRequestsPerSecond: number }[] }).apps[0]?.maxHttpRequestsPerSecond === 5,
          'the saved maxHttpRequestsPerSecond',
        );

        // Rotate in place; the new secret has a Copy button that copies it.
        await last.getByRole('button', { name: 'Rotate secret' }).click();
        const grace = page.getByLabel('Seconds the old secret stays valid');
        await until(async () => inViewport(page, `form[aria-label="Rotate the secret of ${prefix}49"]`), 'the rotate form in the viewport');
        await grace.fill('60');
        await page.getByRole('button', { name: 'Rotate', exact: true }).click();
        const status = page.getByRole('status').filter({ hasText: `New secret of ${prefix}49` });
        await status.waitFor();
        const rotated = /shown once\): ([0-9a-f]{32})/.exec((await status.textContent()) ?? '')?.[1];
        expect(rotated).toBeDefined();
        // The secret is shown where it can be seen: the page scrolls up to it from the last row.
        await until(async () => inViewport(page, '.notice'), 'the new secret in the viewport');
        await status.getByRole('button', { name: 'Copy' }).click();
        await status.getByRole('button', { name: 'Copied' }).waitFor();
        expect(await page.evaluate('navigator.clipboard.readText()')).toBe(rotated);
        expect(await wordsBrokenIn(page, 'button, th, label')).toEqual([]);
        expect(errors).toEqual([]);
      } finally {
        await context.close();
      }
    });
  }

  it('shows the overview\'s apps a page at a time, with their total', async () => {
    const ids = Array.from({ length: 60 }, (_, i) => `paged-${String(i).padStart(2, '0')}`);
    for (const id of ids) expect((await admin('/apps', { method: 'POST', body: { id, key: `${id}-key` } })).status).toBe(201);
    const total = ((await (await admin('/overview')).json()) as { appsTotal: number }).appsTotal;
    expect(total).toBeGreaterThan(60);
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    try {
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${herald.baseUrl}/dashboard#token=${TOKEN}`);
      const apps = page.locator('section.card', { has: page.getByRole('heading', { name: /^Apps/ }) });
      await apps.getByRole('heading', { name: `Apps (${total})` }).waitFor();
      const listed = async () => apps.locator('tbody tr td:first-child a').allTextContents();
      await until(async () => (await listed()).length === 50, 'a first page of 50 apps');
      const first = await listed();
      expect(first).toEqual([...first].sort());
      await apps.getByRole('button', { name: 'Next page of apps' }).click();
      await until(async () => !(await listed()).includes(first[0]!), 'the second page');
      const second = await listed();
      expect(second[0]! > first[first.length - 1]!).toBe(true);
      expect(first.length + second.length).toBe(Math.min(total, 100));
      await apps.getByRole('button', { name: 'First page of apps' }).click();
      await until(async () => (await listed())[0] === first[0], 'the first page again');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
