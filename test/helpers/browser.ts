/**
 * A real Chromium for the dashboard tests: Debian's `chromium` driven by playwright-core (no
 * browser download). One launch per test file; each test opens its own page. Playwright gives
 * every launch a fresh temporary profile (user-data-dir) and removes it on close.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.HERALD_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
];

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM_PATH);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true, timeout: 30_000 });
}

/** Page errors and console errors of a page, collected as they happen. */
export function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
  });
  return errors;
}

/** Words of visible elements matching `selector` that the layout split over two lines ("Disabl / e"). */
export async function wordsBrokenIn(page: Page, selector: string): Promise<string[]> {
  // Evaluated in the page (a string: this file is compiled without the DOM types).
  return (await page.evaluate(`(() => {
    const broken = [];
    for (const el of document.querySelectorAll(${JSON.stringify(selector)})) {
      if (el.offsetParent === null) continue;
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        for (const m of n.data.matchAll(/\\S+/g)) {
          const range = document.createRange();
          range.setStart(n, m.index);
          range.setEnd(n, m.index + m[0].length);
          const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
          if (lines.size > 1) broken.push(m[0]);
        }
      }
    }
    return broken;
  })()`)) as string[];
}
