/**
 * The dashboard page: `GET /dashboard` and every deep link under it answer `index.html`; the
 * bundle is under `/dashboard/assets/`. Files come from `dist/dashboard/` (built by
 * `npm run build` from `dashboard/`), read once at start-up: a few hundred KB, no CDN.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Route } from '../http/router.js';
import type { Reply, RouteOptions } from '../http/uws-http.js';

/** dist/dashboard, next to dist/src. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../dashboard/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.map': 'application/json',
};

/** Same-origin only: the page loads nothing from elsewhere and cannot be framed. */
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

interface Asset {
  body: Buffer;
  type: string;
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const assetDir = join(dir, 'assets');
  if (!existsSync(assetDir)) return assets;
  for (const name of readdirSync(assetDir)) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, { body: readFileSync(join(assetDir, name)), type });
  }
  return assets;
}

export function dashboardRoutes(dir = DASHBOARD_DIR): Route[] {
  const indexPath = join(dir, 'index.html');
  const index = existsSync(indexPath) ? readFileSync(indexPath) : undefined;
  const assets = loadAssets(dir);
  const options: RouteOptions = { errorStyle: 'plain', bodyLimit: 0, headers: [] };
  const page = (): Reply =>
    index
      ? { status: 200, body: index, headers: { 'content-type': TYPES['.html']!, ...PAGE_HEADERS } }
      : { status: 503, body: 'The dashboard is not built: run npm run build\n', headers: { 'content-type': 'text/plain; charset=utf-8' } };
  return [
    { method: 'get', pattern: '/dashboard', options, handler: page },
    { method: 'get', pattern: '/dashboard/*', options, handler: page },
    {
      method: 'get',
      pattern: '/dashboard/assets/:name',
      options,
      handler: (rc) => {
        const asset = assets.get(rc.params.name ?? '');
        if (!asset) return { status: 404, body: 'Not found\n', headers: { 'content-type': 'text/plain; charset=utf-8' } };
        return { status: 200, body: asset.body, headers: { 'content-type': asset.type, ...PAGE_HEADERS } };
      },
    },
  ];
}
