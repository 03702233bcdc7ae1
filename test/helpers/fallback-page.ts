/**
 * An app's web page on its own origin (a local HTTP server on another port than Herald): it
 * serves pusher-js' browser build and the app's auth endpoints (`/auth` for channels,
 * `/user-auth` for sign-in, signed with the `pusher` SDK), as a real app's backend would.
 * Herald is another origin to the page, so pusher-js' HTTP fallback requests are cross-origin
 * (CORS, with preflights).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type PusherServer from 'pusher';
import { REPO_ROOT } from './herald-process.js';

const PUSHER_JS = readFileSync(join(REPO_ROOT, 'node_modules/pusher-js/dist/web/pusher.js'));

export interface FallbackPage {
  readonly url: string;
  close(): Promise<void>;
}

/** `sdk` signs; presence members and signed-in users are `user-<socket id>` unless the page asks for a user id (`user_id` form field). */
export async function startFallbackPage(sdk: PusherServer): Promise<FallbackPage> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/pusher.js') {
        res.writeHead(200, { 'content-type': 'application/javascript' }).end(PUSHER_JS);
      } else if (path === '/auth') {
        const socketId = form.get('socket_id') ?? '';
        const channel = form.get('channel_name') ?? '';
        const userId = new URLSearchParams((req.url ?? '').split('?')[1] ?? '').get('user') ?? `user-${socketId}`;
        const auth = channel.startsWith('presence-') ? sdk.authorizeChannel(socketId, channel, { user_id: userId, user_info: { name: userId } }) : sdk.authorizeChannel(socketId, channel);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(auth));
      } else if (path === '/user-auth') {
        const socketId = form.get('socket_id') ?? '';
        const userId = new URLSearchParams((req.url ?? '').split('?')[1] ?? '').get('user') ?? `user-${socketId}`;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(sdk.authenticateUser(socketId, { id: userId })));
      } else {
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><html><head><script src="/pusher.js"></script></head><body>app</body></html>');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * In the page (a string: tests are compiled without the DOM types): `window.fb` holds one
 * pusher-js client and what it received. `options` are added to the connection settings.
 */
export function pageClientScript(heraldPort: number, key: string, options: Record<string, unknown>, user?: string): string {
  const settings = {
    wsHost: '127.0.0.1',
    wsPort: heraldPort,
    httpHost: '127.0.0.1',
    httpPort: heraldPort,
    forceTLS: false,
    disableStats: true,
    cluster: 'local',
    channelAuthorization: { endpoint: user ? `/auth?user=${user}` : '/auth', transport: 'ajax' },
    userAuthentication: { endpoint: user ? `/user-auth?user=${user}` : '/user-auth', transport: 'ajax' },
    ...options,
  };
  return `(() => {
    const client = new Pusher(${JSON.stringify(key)}, ${JSON.stringify(settings)});
    const fb = { client, events: [], states: [], errors: [] };
    client.connection.bind('state_change', (s) => fb.states.push(s.current));
    client.connection.bind('error', (e) => fb.errors.push(JSON.stringify(e && e.data ? e.data : e)));
    client.bind_global((event, data) => fb.events.push({ channel: null, event, data }));
    fb.subscribe = (name) => {
      const ch = client.subscribe(name);
      ch.bind_global((event, data) => fb.events.push({ channel: name, event, data }));
      return true;
    };
    fb.transport = () => client.connection.connection ? client.connection.connection.transport.name : null;
    window.fb = fb;
    return true;
  })()`;
}
