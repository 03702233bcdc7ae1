/**
 * The channel HTTP API end to end: the official server SDK (`pusher`) calls every endpoint
 * of the built server, and official `pusher-js` clients receive what it triggers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import type { Channel } from 'pusher-js';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient as PusherClient } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const MAIN = { id: 'app-id', key: 'app-key', secret: 'app-secret', userAuthentication: true };
const COUNTED = { id: 'counted-id', key: 'counted-key', secret: 'counted-secret', subscriptionCount: true, userAuthentication: true };
const QUOTA = { id: 'quota-id', key: 'quota-key', secret: 'quota-secret', messageQuota: 4 };
type Creds = typeof MAIN | typeof COUNTED | typeof QUOTA;

/** The SDK's own signer (exported at run time, missing from its typings). */
const SdkToken = (Pusher as unknown as { Token: new (key: string, secret: string) => { sign(data: string): string } }).Token;

let herald: HeraldProcess;
const clients: PusherClient[] = [];

function sdk(creds: Creds = MAIN): Pusher {
  return channelsSdk(herald.port, creds);
}

interface Client {
  pusher: PusherClient;
  socketId: string;
}

/** A connected pusher-js client; `userId` makes its presence subscriptions and sign-in that user. */
async function connect(creds: Creds = MAIN, userId = 'anon'): Promise<Client> {
  const server = sdk(creds);
  const pusher = pusherJsClient(herald.port, creds.key, {
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) =>
        callback(null, server.authorizeChannel(socketId, channelName, channelName.startsWith('presence-') ? { user_id: userId, user_info: { name: userId } } : undefined)),
    },
    userAuthentication: {
      customHandler: ({ socketId }, callback) => callback(null, server.authenticateUser(socketId, { id: userId })),
    },
  });
  clients.push(pusher);
  await until(() => pusher.connection.state === 'connected', 'connection');
  return { pusher, socketId: pusher.connection.socket_id };
}

interface Received {
  event: string;
  data: unknown;
}

/** Subscribes and resolves once subscribed, with the list of events the channel receives. */
async function subscribe(client: Client, channelName: string): Promise<Received[]> {
  const received: Received[] = [];
  const channel: Channel = client.pusher.subscribe(channelName);
  let subscribed = false;
  channel.bind('pusher:subscription_succeeded', () => (subscribed = true));
  channel.bind_global((event: string, data: unknown) => {
    if (!event.startsWith('pusher')) received.push({ event, data });
  });
  await until(() => subscribed, `subscription to ${channelName}`);
  return received;
}

beforeAll(async () => {
  herald = await startHerald({ config: { apps: [MAIN, COUNTED, QUOTA] } });
});
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});
afterAll(() => herald.dispose());

describe('C1 trigger with the pusher SDK', () => {
  it('delivers the data exactly as sent to every subscriber and answers {}', async () => {
    const [a, b] = [await connect(), await connect()];
    const [onA, onB] = [await subscribe(a, 'news'), await subscribe(b, 'news')];
    const text = 'plain "text" with ünicode, \\ and a\nnewline';
    const res = await sdk().trigger('news', 'headline', text);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    const json = { id: 7, nested: { list: [1, 'two', null] }, emoji: '🎉' };
    await sdk().trigger('news', 'story', json);
    await until(() => onA.length === 2 && onB.length === 2, 'both events on both clients');
    for (const on of [onA, onB]) {
      expect(on).toEqual([
        { event: 'headline', data: text },
        { event: 'story', data: json },
      ]);
    }
  });

  it('delivers once per unique channel when triggering to several', async () => {
    const c = await connect();
    const [onX, onY] = [await subscribe(c, 'multi-x'), await subscribe(c, 'multi-y')];
    await sdk().trigger(['multi-x', 'multi-y', 'multi-x'], 'ev', 'both');
    await sdk().trigger('multi-x', 'marker', '');
    await until(() => onX.length === 2 && onY.length === 1, 'events and marker');
    expect(onX.map((e) => e.event)).toEqual(['ev', 'marker']);
    expect(onY).toEqual([{ event: 'ev', data: 'both' }]);
  });

  it('leaves out the connection named by socket_id', async () => {
    const [a, b] = [await connect(), await connect()];
    const [onA, onB] = [await subscribe(a, 'excl'), await subscribe(b, 'excl')];
    await sdk().trigger('excl', 'not-for-a', 'x', { socket_id: a.socketId });
    await sdk().trigger('excl', 'for-all', 'y');
    await until(() => onA.length === 1 && onB.length === 2, 'marker on both');
    expect(onA.map((e) => e.event)).toEqual(['for-all']);
    expect(onB.map((e) => e.event)).toEqual(['not-for-a', 'for-all']);
  });

  it('accepts the parameters in the query string of an empty POST', async () => {
    const c = await connect();
    const on = await subscribe(c, 'query-a');
    const path = '/apps/app-id/events';
    const ts = Math.floor(Date.now() / 1000);
    const signed = `auth_key=app-key&auth_timestamp=${ts}&auth_version=1.0&channels[]=query-a&channels[]=query-b&data=from query&name=q`;
    const signature = new SdkToken(MAIN.key, MAIN.secret).sign(`POST\n${path}\n${signed}`);
    const res = await fetch(`${herald.baseUrl}${path}?${signed.replace(' ', '%20')}&auth_signature=${signature}`, { method: 'POST' });
    expect(res.status).toBe(200);
    await until(() => on.length === 1, 'query-string event');
    expect(on[0]).toEqual({ event: 'q', data: 'from query' });
  });

  it('answers user_count for a presence channel, counting a user with several connections once', async () => {
    const clientsOfU1 = [await connect(MAIN, 'u1'), await connect(MAIN, 'u1')];
    const u2 = await connect(MAIN, 'u2');
    for (const c of [...clientsOfU1, u2]) await subscribe(c, 'presence-room');
    await subscribe(u2, 'plain-room');
    const res = await sdk().trigger(['presence-room', 'plain-room'], 'ev', 'x', { info: 'user_count,subscription_count' });
    // subscription_count is off for this app and does not apply to presence: left out.
    expect(await res.json()).toEqual({ channels: { 'presence-room': { user_count: 2 }, 'plain-room': {} } });

    const list = await sdk().get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } });
    expect(await list.json()).toEqual({ channels: { 'presence-room': { user_count: 2 } } });
    const one = await sdk().get({ path: '/channels/presence-room', params: { info: 'user_count' } });
    expect(await one.json()).toEqual({ occupied: true, user_count: 2 });
    const users = (await (await sdk().get({ path: '/channels/presence-room/users' })).json()) as { users: { id: string }[] };
    expect(users.users.map((u) => u.id).sort()).toEqual(['u1', 'u2']);

    clientsOfU1[0]!.pusher.disconnect();
    clientsOfU1[1]!.pusher.disconnect();
    await until(() => clientsOfU1.every((c) => c.pusher.connection.state === 'disconnected'), 'u1 gone');
    let after: { users: { id: string }[] } | undefined;
    await until(async () => {
      after = (await (await sdk().get({ path: '/channels/presence-room/users' })).json()) as { users: { id: string }[] };
      return after.users.length === 1;
    }, () => `one user left in presence-room (got ${JSON.stringify(after)})`);
    expect(after).toEqual({ users: [{ id: 'u2' }] });
  });

  it('answers subscription_count when the app counts subscriptions', async () => {
    const [a, b] = [await connect(COUNTED), await connect(COUNTED)];
    await subscribe(a, 'counted');
    await subscribe(b, 'counted');
    const res = await sdk(COUNTED).trigger('counted', 'ev', 'x', { info: 'subscription_count' });
    expect(await res.json()).toEqual({ channels: { counted: { subscription_count: 2 } } });
    const info = await sdk(COUNTED).get({ path: '/channels/counted', params: { info: 'subscription_count' } });
    expect(await info.json()).toEqual({ occupied: true, subscription_count: 2 });
  });
});

describe('C2 triggerBatch with the pusher SDK', () => {
  it('delivers each event to its channel in order and answers info per index', async () => {
    const u = await connect(MAIN, 'batcher');
    const onA = await subscribe(u, 'batch-a');
    const onB = await subscribe(u, 'batch-b');
    await subscribe(u, 'presence-batch');
    const plain = await sdk().triggerBatch([
      { channel: 'batch-a', name: 'one', data: '1st' },
      { channel: 'batch-b', name: 'two', data: { n: 2 } },
      { channel: 'batch-a', name: 'three', data: '3rd' },
    ]);
    expect(await plain.json()).toEqual({});
    const withInfo = await sdk().triggerBatch([
      { channel: 'batch-a', name: 'four', data: '4th' },
      { channel: 'presence-batch', name: 'five', data: '5th', info: 'user_count' },
      { channel: 'presence-batch', name: 'six', data: '6th', info: 'user_count' },
    ]);
    expect(await withInfo.json()).toEqual({ batch: [{}, { user_count: 1 }, { user_count: 1 }] });
    await until(() => onA.length === 3 && onB.length === 1, 'batch events');
    expect(onA).toEqual([
      { event: 'one', data: '1st' },
      { event: 'three', data: '3rd' },
      { event: 'four', data: '4th' },
    ]);
    expect(onB).toEqual([{ event: 'two', data: { n: 2 } }]);
  });
});

describe('C3, C4 and C6 with the pusher SDK', () => {
  it('lists occupied channels, by prefix', async () => {
    const c = await connect(MAIN, 'lister');
    await subscribe(c, 'list-one');
    await subscribe(c, 'list-two');
    await subscribe(c, 'private-list');
    const all = (await (await sdk().get({ path: '/channels' })).json()) as { channels: Record<string, object> };
    expect(all.channels).toMatchObject({ 'list-one': {}, 'list-two': {}, 'private-list': {} });
    const byPrefix = await sdk().get({ path: '/channels', params: { filter_by_prefix: 'list-' } });
    expect(await byPrefix.json()).toEqual({ channels: { 'list-one': {}, 'list-two': {} } });
  });

  it('reports an unoccupied channel and the cache of a cache channel', async () => {
    expect(await (await sdk().get({ path: '/channels/nobody-here' })).json()).toEqual({ occupied: false });
    expect(await (await sdk().get({ path: '/channels/cache-empty', params: { info: 'cache' } })).json()).toEqual({ occupied: false, cache: null });
    await sdk().trigger('cache-prices', 'tick', '{"eur":1.08}');
    // The cache write is fire-and-forget to the owning shard: poll briefly.
    const body = await until(async () => {
      const b = (await (await sdk().get({ path: '/channels/cache-prices', params: { info: 'cache' } })).json()) as { occupied: boolean; cache: { data: string; ttl: number } | null };
      return b.cache !== null && b;
    }, 'the cached tick');
    expect(body.occupied).toBe(false);
    expect(body.cache!.data).toBe('{"eur":1.08}');
    expect(body.cache!.ttl).toBeGreaterThan(1700);
    expect(body.cache!.ttl).toBeLessThanOrEqual(1800);
    // A new subscriber gets the cached event, exactly as triggered.
    const c = await connect();
    const cached: unknown[] = [];
    c.pusher.subscribe('cache-prices').bind('tick', (d: unknown) => cached.push(d));
    await until(() => cached.length === 1, 'cached event');
    expect(cached[0]).toEqual({ eur: 1.08 });
  });
});

describe('C5 terminateUserConnections with the pusher SDK', () => {
  it('closes every connection of the signed-in user and lets the user reconnect', async () => {
    const victims = [await connect(MAIN, 'victim'), await connect(MAIN, 'victim')];
    const bystander = await connect(MAIN, 'bystander');
    for (const c of [...victims, bystander]) {
      c.pusher.signin();
      await c.pusher.user.signinDonePromise;
    }
    const onBystander = await subscribe(bystander, 'after-terminate');
    const res = await sdk().terminateUserConnections('victim');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    await until(() => victims.every((v) => v.pusher.connection.state !== 'connected'), 'victims disconnected');
    await sdk().trigger('after-terminate', 'still-here', 'yes');
    await until(() => onBystander.length === 1, 'bystander event');
    expect(bystander.pusher.connection.state).toBe('connected');
    const again = await connect(MAIN, 'victim');
    again.pusher.signin();
    await again.pusher.user.signinDonePromise;
    expect(again.pusher.connection.state).toBe('connected');
  });
});

/** A client signed in as `userId`, once pusher-js has joined its `#server-to-user-<id>` channel. */
async function signedIn(userId: string, creds: Creds = MAIN): Promise<Client> {
  const client = await connect(creds, userId);
  client.pusher.signin();
  await client.pusher.user.signinDonePromise;
  await until(() => client.pusher.user.serverToUserChannel?.subscribed === true, `${userId}'s server-to-user channel`);
  return client;
}

/** Events the signed-in user of `client` receives on its user channel (`pusher.user.bind`). */
function userEvents(client: Client, ...names: string[]): Received[] {
  const received: Received[] = [];
  for (const event of names) client.pusher.user.bind(event, (data: unknown) => received.push({ event, data }));
  return received;
}

/** A signed POST of a JSON body through the SDK, which JSON-encodes `body` itself (its typings say string). */
function sdkPost(path: string, body: object, creds: Creds = MAIN): ReturnType<Pusher['post']> {
  return sdk(creds).post({ path, body: body as unknown as string });
}

/** The status and error code of a refused SDK call. */
async function refusal(call: Promise<unknown>): Promise<{ status: number | undefined; code: string; error: string }> {
  const err = (await call.then(
    () => null,
    (e: unknown) => e,
  )) as Pusher.RequestError | null;
  expect(err, 'the request should have been refused').not.toBeNull();
  const body = JSON.parse(err!.body ?? '{}') as { code: string; error: string };
  return { status: err!.status, code: body.code, error: body.error };
}

describe('sendToUser with the pusher SDK', () => {
  it("delivers to every signed-in connection of that user and to no one else's", async () => {
    const u1 = [await signedIn('u1'), await signedIn('u1')];
    const u2 = await signedIn('u2');
    const [onU1a, onU1b, onU2] = [...u1, u2].map((c) => userEvents(c, 'hello', 'marker'));
    const res = await sdk().sendToUser('u1', 'hello', { a: 1 });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    // Triggered after hello, on the same path: once u2 has it, hello would have arrived too.
    await sdk().sendToUser('u2', 'marker', 'for u2');
    await until(() => onU1a!.length === 1 && onU1b!.length === 1 && onU2!.length === 1, 'hello on u1, marker on u2');
    expect(onU1a).toEqual([{ event: 'hello', data: { a: 1 } }]);
    expect(onU1b).toEqual([{ event: 'hello', data: { a: 1 } }]);
    expect(onU2).toEqual([{ event: 'marker', data: 'for u2' }]);
  });

  it('reaches a user id of any characters and leaves out the socket_id connection', async () => {
    const odd = 'mail@x.org/ü 1#2';
    const [a, b] = [await signedIn(odd), await signedIn(odd)];
    const [onA, onB] = [userEvents(a, 'ev'), userEvents(b, 'ev')];
    await sdk().sendToUser(odd, 'ev', 'all');
    await sdkPost('/events', { name: 'ev', data: 'not a', channels: [`#server-to-user-${odd}`], socket_id: a.socketId });
    await until(() => onA.length === 1 && onB.length === 2, 'events on both connections');
    expect(onA.map((e) => e.data)).toEqual(['all']);
    expect(onB.map((e) => e.data)).toEqual(['all', 'not a']);
  });

  it('is accepted in C1 and C2 next to ordinary channels, with {} for info', async () => {
    const u = await signedIn('counted-user', COUNTED);
    const onUser = userEvents(u, 'c1', 'c2');
    const plain = await subscribe(u, 'counted-plain');
    const c1 = await sdkPost(
      '/events',
      { name: 'c1', data: 'one', channels: ['#server-to-user-counted-user', 'counted-plain'], info: 'subscription_count,user_count' },
      COUNTED,
    );
    expect(await c1.json()).toEqual({ channels: { '#server-to-user-counted-user': {}, 'counted-plain': { subscription_count: 1 } } });
    const c2 = await sdk(COUNTED).triggerBatch([
      { channel: '#server-to-user-counted-user', name: 'c2', data: 'two', info: 'subscription_count' },
      { channel: 'counted-plain', name: 'c2', data: 'three' },
    ]);
    expect(await c2.json()).toEqual({ batch: [{}, {}] });
    await until(() => onUser.length === 2 && plain.length === 2, 'user and channel events');
    expect(onUser).toEqual([
      { event: 'c1', data: 'one' },
      { event: 'c2', data: 'two' },
    ]);
    expect(plain).toEqual([
      { event: 'c1', data: 'one' },
      { event: 'c2', data: 'three' },
    ]);
  });

  it('refuses every other # name in triggers, and # names in C3, C4 and C6, with 400', async () => {
    const trigger = (channels: string[]) => sdkPost('/events', { name: 'ev', data: 'x', channels });
    const bogus = await refusal(trigger(['ok', '#bogus']));
    expect(bogus).toMatchObject({ status: 400, code: 'INVALID_CHANNEL_NAME' });
    expect(bogus.error).toContain("channels[1] '#bogus' is not a valid channel name");
    for (const channels of [['#server-to-user-'], [`#server-to-user-${'x'.repeat(201)}`], ['#server-to-user'], ['server-to-user-#u1']]) {
      expect(await refusal(trigger(channels))).toMatchObject({ status: 400, code: 'INVALID_CHANNEL_NAME' });
    }
    expect((await refusal(trigger(['#server-to-user-']))).error).toContain('the user id after #server-to-user- must be 1 to 200 characters');
    const batch = await refusal(sdk().triggerBatch([{ channel: '#bogus', name: 'ev', data: 'x' }]));
    expect(batch).toMatchObject({ status: 400, code: 'INVALID_CHANNEL_NAME' });
    expect(batch.error).toContain("batch[0].channel '#bogus'");

    expect(await refusal(sdk().get({ path: '/channels/%23server-to-user-u1' }))).toMatchObject({ status: 400, code: 'INVALID_CHANNEL_NAME' });
    expect(await refusal(sdk().get({ path: '/channels/%23server-to-user-u1/users' }))).toMatchObject({ status: 400, code: 'INVALID_CHANNEL_NAME' });
    // C3: the SDK does not escape query values, so sign the decoded value and send it escaped.
    const path = '/apps/app-id/channels';
    const signed = `auth_key=app-key&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0&filter_by_prefix=#server-to-user-`;
    const signature = new SdkToken(MAIN.key, MAIN.secret).sign(`GET\n${path}\n${signed}`);
    const list = await fetch(`${herald.baseUrl}${path}?${signed.replace('#', '%23')}&auth_signature=${signature}`);
    expect(list.status).toBe(400);
    expect(await list.json()).toMatchObject({ code: 'INVALID_PARAMETERS' });
  });
});

describe('daily message quota', () => {
  it('counts triggers (two with info) and refuses the one over the quota with 403', async () => {
    const quota = sdk(QUOTA);
    await quota.trigger('q', 'ev', '1');
    await quota.trigger('q', 'ev', '2');
    await quota.trigger('q', 'ev', '3', { info: 'subscription_count' });
    const err = (await quota.trigger('q', 'ev', '4').catch((e: unknown) => e)) as Pusher.RequestError;
    expect(err.status).toBe(403);
    expect(JSON.parse(err.body!)).toEqual({
      code: 'APP_OVER_QUOTA',
      error: 'Application quota-id is over its message quota: 4 of 4 messages used today (UTC), this request needs 1; the count resets at 00:00 UTC',
    });
  });
});
