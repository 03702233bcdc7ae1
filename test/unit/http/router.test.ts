/**
 * The route table on a real uWS app on a free port, called with fetch: parameters, the error
 * styles, a handler that throws a bug (500, the process and the next request unharmed) and the
 * drain (503 NOT_READY except for the routes served while draining).
 */
import type { us_listen_socket } from 'uWebSockets.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeraldError } from '../../../src/errors.js';
import { CORS_ANY_ORIGIN, preflightReply } from '../../../src/http/cors.js';
import { paramNames, registerRoutes, type Route } from '../../../src/http/router.js';
import { loadUws } from '../../../src/http/uws-native.js';

const { uws } = loadUws();
let listen: us_listen_socket;
let base: string;
let draining = false;

beforeAll(async () => {
  const app = uws.App();
  const routes: Route[] = [
    { method: 'get', pattern: '/hello/:name', options: { errorStyle: 'plain', bodyLimit: 0 }, handler: (rc) => ({ status: 200, body: { hello: rc.params.name } }) },
    { method: 'post', pattern: '/echo', options: { errorStyle: 'channel', bodyLimit: 16, bodyTooLarge: 'BODY_TOO_LARGE' }, handler: (rc) => ({ status: 200, body: { bytes: rc.body.length } }) },
    { method: 'get', pattern: '/push-missing', options: { errorStyle: 'push', bodyLimit: 0, extraHeaders: CORS_ANY_ORIGIN }, handler: () => { throw new HeraldError('DEVICE_NOT_FOUND', 'no such device'); } },
    { method: 'get', pattern: '/bug', options: { errorStyle: 'channel', bodyLimit: 0 }, handler: () => { throw new Error('a bug'); } },
    { method: 'get', pattern: '/probe', options: { errorStyle: 'plain', bodyLimit: 0 }, servedWhileDraining: true, handler: () => ({ status: 200, body: { ok: true } }) },
    { method: 'options', pattern: '/echo', options: { errorStyle: 'channel', bodyLimit: 0 }, handler: () => preflightReply('GET, POST, OPTIONS', 'content-type') },
  ];
  registerRoutes(app, routes, { draining: () => draining });
  listen = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('listen')))));
  base = `http://127.0.0.1:${uws.us_socket_local_port(listen)}`;
});

afterAll(() => uws.us_listen_socket_close(listen));

describe('route table', () => {
  it('names the parameters of a pattern', () => {
    expect(paramNames('/apps/:appId/channels/:channelName')).toEqual(['appId', 'channelName']);
  });

  it('passes path parameters and bodies to handlers, and caps bodies', async () => {
    expect(await (await fetch(`${base}/hello/ada`)).json()).toEqual({ hello: 'ada' });
    expect(await (await fetch(`${base}/echo`, { method: 'POST', body: '12345' })).json()).toEqual({ bytes: 5 });
    const tooLarge = await fetch(`${base}/echo`, { method: 'POST', body: 'x'.repeat(17) });
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.json()).toMatchObject({ code: 'BODY_TOO_LARGE' });
  });

  it('answers catalogue errors in the route\'s style, with its extra headers', async () => {
    const res = await fetch(`${base}/push-missing`);
    expect(res.status).toBe(404);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(await res.json()).toEqual({ error: 'Device not found', description: 'no such device' });
    const preflight = await fetch(`${base}/echo`, { method: 'OPTIONS' });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    expect(preflight.headers.get('access-control-max-age')).toBe('86400');
  });

  it('answers a bug with a 500 and goes on serving', async () => {
    const res = await fetch(`${base}/bug`);
    expect(res.status).toBe(500);
    expect(await (await fetch(`${base}/hello/again`)).json()).toEqual({ hello: 'again' });
  });

  it('answers 503 NOT_READY while draining, except the routes served while draining', async () => {
    draining = true;
    try {
      const res = await fetch(`${base}/hello/late`);
      expect(res.status).toBe(503);
      expect((await fetch(`${base}/probe`)).status).toBe(200);
    } finally {
      draining = false;
    }
  });
});
