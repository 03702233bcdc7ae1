/**
 * What a connection may send (Pusher protocol 7): ping/pong, subscribe, unsubscribe, sign-in
 * and client events. Bad input is answered with pusher:error or pusher:subscription_error and
 * the connection stays open; only the client-event rate limit (4301), a failed sign-in (4009)
 * and an oversized message (1009) close it.
 */
import { log, RateLimitedLog } from '../../log.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import { CLOSE_CODES, HeraldError } from '../../errors.js';
import { isObject } from '../../json.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { channelSignatureInput, userSignatureInput, verifyAuth } from '../auth.js';
import { MAX_USER_ID_LENGTH, channelType, isValidChannelName, isValidUserId, requiresAuth } from '../names.js';
import * as frames from '../frames.js';
import { keepsHistory } from '../history/patterns.js';
import { parsePreviousSocketIds } from '../history/previous-sockets.js';
import { endWithError, type SocketRegistry, type SocketState, type ClientSocket } from '../socket-registry.js';
import type { Recovering, Subscriptions } from './subscriptions.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import { graceSecret } from '../../config/secret-grace.js';

/** Channels one connection may hold (joined or in flight): bounds per-socket state and channel state traffic. */
export const MAX_CHANNELS_PER_CONNECTION = 1000;
/** Most user ids in a sign-in watchlist. */
export const MAX_WATCHLIST_LENGTH = 100;

export interface ProtocolDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly registry: SocketRegistry;
  readonly adapter: ChannelAdapter;
  readonly subscriptions: Subscriptions;
  readonly debug: DebugTap;
}

/** Where an app's setting changes, for either place an app can live. */
const WHERE_TO_CHANGE = 'apps[] in the config file for an app defined there; the admin API (PATCH /admin/v1/apps/<id>) or the dashboard\'s Apps page for one created there';

/** Auth failures at debug level, one line per app and kind every 10 s (with a count). */
const authFailureLog = new RateLimitedLog('debug', 10_000);

export class ProtocolHandler {
  /** App ids with a webhook that wants client_event: only those cost a message to the webhook outbox per client event. */
  private readonly clientEventWebhookApps: Set<string>;

  constructor(private readonly deps: ProtocolDeps) {
    this.clientEventWebhookApps = new Set(deps.config.apps.filter((a) => wantsClientEvents(a)).map((a) => a.id));
  }

  /** Takes one changed app (admin API); `next` undefined: removed. One entry changes, whatever the count of the others. */
  reloadApp(appId: string, next: AppConfig | undefined): void {
    if (next && wantsClientEvents(next)) this.clientEventWebhookApps.add(appId);
    else this.clientEventWebhookApps.delete(appId);
  }

  /** One frame from the client. `raw` is only valid during this call. */
  handle(state: SocketState, ws: ClientSocket, raw: ArrayBuffer, isBinary: boolean): void {
    state.lastSeenMs = Date.now();
    state.pingSentMs = 0;
    const limit = this.deps.config.maxWebSocketFrameBytes;
    if (raw.byteLength > limit) {
      // A pusher:error without a close code, then the standard 1009.
      const err = new HeraldError('WS_MESSAGE_TOO_LARGE', `Message of ${raw.byteLength} bytes is larger than the limit of ${limit} bytes`);
      return endWithError(ws, CLOSE_CODES.MESSAGE_TOO_BIG, err.message, null, 'Message too big');
    }
    if (isBinary) return this.fail(ws, new HeraldError('WS_BINARY_MESSAGE'));
    let msg: unknown;
    try {
      // uWS has already refused text frames that are not valid UTF-8.
      msg = JSON.parse(Buffer.from(raw).toString('utf8'));
    } catch {
      return this.fail(ws, new HeraldError('WS_INVALID_MESSAGE', 'Message is not valid JSON'));
    }
    if (!isObject(msg) || typeof msg.event !== 'string') return this.fail(ws, new HeraldError('WS_INVALID_MESSAGE'));
    const event = msg.event;
    switch (event) {
      case 'pusher:ping':
        ws.send(frames.PONG_FRAME);
        return;
      case 'pusher:pong':
        return;
      case 'pusher:subscribe':
        return this.subscribe(state, ws, dataObject(msg.data));
      case 'pusher:unsubscribe':
        return this.unsubscribe(state, ws, dataObject(msg.data));
      case 'pusher:signin':
        return this.signin(state, ws, dataObject(msg.data));
      default:
        if (event.startsWith('client-')) return this.clientEvent(state, ws, event, msg.channel, msg.data);
        return this.fail(ws, new HeraldError('WS_UNKNOWN_EVENT', `Unknown event '${event.slice(0, 100)}'`));
    }
  }

  private fail(ws: ClientSocket, err: HeraldError): void {
    ws.send(frames.nonFatalErrorFrame(err));
  }

  private subscribe(state: SocketState, ws: ClientSocket, data: Record<string, unknown> | null): void {
    const channel = data?.channel;
    if (typeof channel !== 'string') return this.fail(ws, new HeraldError('WS_INVALID_MESSAGE', 'pusher:subscribe needs data.channel'));
    if (channel.startsWith(frames.SERVER_TO_USER_PREFIX)) return this.subscribeUserChannel(state, ws, channel);
    const refuse = (err: HeraldError): void => {
      ws.send(frames.subscriptionError(channel, err));
    };
    if (!isValidChannelName(channel)) {
      return refuse(new HeraldError('SUBSCRIPTION_INVALID_CHANNEL', 'Invalid channel name: 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;'));
    }
    const existing = state.channels.get(channel);
    if (existing?.wanted) return;
    if (!existing && state.channels.size >= MAX_CHANNELS_PER_CONNECTION) {
      return refuse(new HeraldError('SUBSCRIPTION_TOO_MANY_CHANNELS', `A connection may subscribe to at most ${MAX_CHANNELS_PER_CONNECTION} channels`));
    }
    const app = state.app;
    const presence = channelType(channel).kind === 'presence';
    const channelData = data!.channel_data;
    if (requiresAuth(channel)) {
      if (presence && typeof channelData !== 'string') {
        return refuse(new HeraldError('SUBSCRIPTION_BAD_CHANNEL_DATA', 'Presence subscriptions need channel_data (a JSON string)'));
      }
      // channel_data is signed whenever it is sent, on any channel: the pusher SDKs'
      // authorizeChannel(socket, channel, data) sign it for private channels too, and pusher-js
      // forwards it.
      const input = channelSignatureInput(state.socketId, channel, typeof channelData === 'string' ? channelData : undefined);
      if (!verifyAppAuth(app, data!.auth, input)) {
        authFailureLog.write(`${app.id}\tsubscribe`, 'websocket auth failed', { appId: app.id, socketId: state.socketId, channel: channel.slice(0, 200), reason: 'invalid channel signature' });
        return refuse(new HeraldError('SUBSCRIPTION_AUTH_FAILED', `Invalid signature for ${channel}: check the secret of app ${app.id} (apps[].secret) in your auth endpoint; expected HMAC-SHA256 of '${input}' with the app secret, as '<key>:<hex>'`));
      }
    }
    // A recovering client's last serial (apps[].history): anything but a string is no serial.
    const rawSince = data!.since;
    const since = rawSince === undefined || rawSince === null ? undefined : typeof rawSince === 'string' ? rawSince : '';
    // With it, the socket ids the client had since that serial (null: malformed); ignored
    // without, and on a channel that keeps no history (which is what the client is told then).
    const previousSocketIds = keepsHistory(app, channel) ? parsePreviousSocketIds(data!.previous_socket_ids) : [];
    const recovery: Recovering | undefined = since === undefined ? undefined : { since, previousSocketIds };
    if (!presence) return this.deps.subscriptions.subscribe(state, channel, undefined, recovery);
    const member = parseMember(channelData as string);
    if (member instanceof HeraldError) return refuse(member);
    const infoBytes = member.userInfo === null ? 0 : Buffer.byteLength(JSON.stringify(member.userInfo), 'utf8');
    if (infoBytes > app.maxPresenceUserInfoBytes) {
      return refuse(new HeraldError('PRESENCE_USER_INFO_TOO_LARGE', `user_info is ${infoBytes} bytes; the limit is ${app.maxPresenceUserInfoBytes} bytes`));
    }
    this.deps.subscriptions.subscribe(state, channel, member, recovery);
  }

  /** `#server-to-user-<id>`: pusher-js subscribes after sign-in; only that user may. */
  private subscribeUserChannel(state: SocketState, ws: ClientSocket, channel: string): void {
    if (state.userId === null || channel !== frames.SERVER_TO_USER_PREFIX + state.userId) {
      ws.send(frames.subscriptionError(channel, new HeraldError('SUBSCRIPTION_AUTH_FAILED', 'Sign in as this user before subscribing to its channel')));
      return;
    }
    const answer = (): void => {
      ws.cork(() => {
        ws.send(frames.subscriptionSucceeded(channel));
        this.deps.adapter.attach(ws, state.app.id, channel);
      });
    };
    const cluster = this.deps.adapter.cluster;
    if (!cluster) return answer();
    // Cluster: answered once the node listens to the channel's relay (a socket closed meanwhile gave it back).
    void cluster.listenFor(state.app.id, channel, state.socketId).then(() => {
      if (!state.closed && state.ws === ws) answer();
    });
  }

  private unsubscribe(state: SocketState, ws: ClientSocket, data: Record<string, unknown> | null): void {
    const channel = data?.channel;
    if (typeof channel !== 'string') return this.fail(ws, new HeraldError('WS_INVALID_MESSAGE', 'pusher:unsubscribe needs data.channel'));
    if (channel.startsWith(frames.SERVER_TO_USER_PREFIX)) {
      this.deps.adapter.detach(ws, state.app.id, channel);
      return;
    }
    this.deps.subscriptions.unsubscribe(state, channel);
  }

  private clientEvent(state: SocketState, ws: ClientSocket, event: string, channel: unknown, rawData: unknown): void {
    const app = state.app;
    const now = Date.now();
    if (now - state.clientEventWindowMs >= 1000) {
      state.clientEventWindowMs = now;
      state.clientEventCount = 0;
    }
    if (++state.clientEventCount > app.maxClientEventsPerSecond) {
      const message = `Client event rejected: more than ${app.maxClientEventsPerSecond} client events per second`;
      return endWithError(ws, CLOSE_CODES.CLIENT_EVENT_RATE_LIMIT, message, CLOSE_CODES.CLIENT_EVENT_RATE_LIMIT, 'Client event rate limit exceeded');
    }
    if (!app.clientEvents) return this.fail(ws, new HeraldError('CLIENT_EVENTS_DISABLED', `Client events are not enabled for app ${app.id}: set its clientEvents to true (${WHERE_TO_CHANGE})`));
    if (typeof channel !== 'string') return this.fail(ws, new HeraldError('WS_INVALID_MESSAGE', 'A client event needs a channel'));
    const kind = channelType(channel).kind;
    if (kind !== 'private' && kind !== 'presence') {
      const why = kind === 'encrypted' ? 'encrypted channels do not accept client events' : 'client events are only accepted on private and presence channels';
      return this.fail(ws, new HeraldError('CLIENT_EVENT_REFUSED', `Client event ${event.slice(0, 100)} on ${channel.slice(0, 200)} refused: ${why}`));
    }
    const m = state.channels.get(channel);
    if (!m?.delivered) {
      return this.fail(ws, new HeraldError('CLIENT_EVENT_REFUSED', `Client event refused: not subscribed to ${channel.slice(0, 200)}`));
    }
    if (event.length > 200) return this.fail(ws, new HeraldError('CLIENT_EVENT_REFUSED', 'Client event names are at most 200 characters'));
    const data = typeof rawData === 'string' ? rawData : JSON.stringify(rawData ?? null);
    const bytes = Buffer.byteLength(data, 'utf8');
    if (bytes > app.maxEventDataBytes) {
      return this.fail(ws, new HeraldError('EVENT_DATA_TOO_LARGE', `Client event data is ${bytes} bytes; the limit is ${app.maxEventDataBytes} bytes`));
    }
    const userId = kind === 'presence' ? m.joinedAs?.userId : undefined;
    if (app.history !== null && keepsHistory(app, channel)) {
      // Kept with the channel's next serial by its owner, then sent to everyone but the sender.
      this.deps.adapter.publishKept(app.id, channel, event, data, state.socketId, userId).catch((err: unknown) => {
        log.warn('history client event not published', { appId: app.id, channel, error: String(err) });
      });
    } else {
      // Encoded once; everyone on the channel but the sender.
      this.deps.adapter.publish(app.id, channel, frames.channelEvent(event, channel, data, userId), state.socketId);
    }
    if (channelType(channel).cache) this.deps.adapter.storeCachedEvent(app.id, channel, event, data);
    this.deps.debug.clientEvent(app.id, channel, event, data, state.socketId, userId);
    if (this.clientEventWebhookApps.has(app.id)) {
      this.deps.adapter.clientEvent({ appId: app.id, channel, event, data, socketId: state.socketId, ...(userId === undefined ? {} : { userId }) });
    }
  }

  private signin(state: SocketState, ws: ClientSocket, data: Record<string, unknown> | null): void {
    const app = state.app;
    if (!app.userAuthentication && !app.requireUserAuthentication) return this.fail(ws, new HeraldError('SIGNIN_DISABLED', `User authentication is not enabled for app ${app.id}: set its userAuthentication to true (${WHERE_TO_CHANGE})`));
    if (state.userId !== null) return this.fail(ws, new HeraldError('SIGNIN_FAILED', `Already signed in as ${state.userId}`));
    const userData = data?.user_data;
    const refuse = (message: string): void => endWithError(ws, CLOSE_CODES.UNAUTHORIZED, message, CLOSE_CODES.UNAUTHORIZED, 'Sign-in refused');
    if (typeof userData !== 'string') return refuse('pusher:signin needs user_data (a JSON string)');
    if (!verifyAppAuth(app, data!.auth, userSignatureInput(state.socketId, userData))) {
      authFailureLog.write(`${app.id}\tsignin`, 'websocket auth failed', { appId: app.id, socketId: state.socketId, reason: 'invalid user authentication signature' });
      return refuse(`Invalid user authentication signature: check the secret of app ${app.id} (apps[].secret) in your user authentication endpoint; expected HMAC-SHA256 of '${userSignatureInput(state.socketId, userData)}' with the app secret, as '<key>:<hex>'`);
    }
    let user: unknown;
    try {
      user = JSON.parse(userData);
    } catch {
      return refuse('user_data is not valid JSON');
    }
    // A numeric id (Laravel's user ids are integers) is its decimal string, as for presence user_id.
    const id = isObject(user) ? userIdOf(user.id) : undefined;
    if (!isObject(user) || typeof id !== 'string' || !isValidUserId(id)) {
      return refuse(`user_data needs an id (a string of 1 to ${MAX_USER_ID_LENGTH} characters, well-formed UTF-16, or a number)`);
    }
    const watchlist = user.watchlist ?? [];
    if (!Array.isArray(watchlist) || watchlist.length > MAX_WATCHLIST_LENGTH || !watchlist.every((w) => typeof w === 'string' && isValidUserId(w))) {
      return refuse(`user_data.watchlist must be an array of at most ${MAX_WATCHLIST_LENGTH} user ids of 1 to ${MAX_USER_ID_LENGTH} characters`);
    }
    const userId = id;
    const cameOnline = this.deps.registry.addUser(state, userId);
    if (cameOnline) this.deps.adapter.userPresence(app.id, userId, true);
    const watched = [...new Set(watchlist as string[])];
    ws.cork(() => {
      ws.send(frames.signinSuccess(userData));
      const onlineNow = this.deps.adapter.watch(ws, app.id, watched);
      if (Array.isArray(onlineNow)) sendInitialWatchlist(ws, watched, onlineNow);
      else {
        // Asked of shared state (cluster): sent when known, if the socket is still there.
        onlineNow.then(
          (ids) => {
            if (!state.closed && state.ws === ws) ws.cork(() => sendInitialWatchlist(ws, watched, ids));
          },
          (err: unknown) => log.warn('watchlist: online users could not be read', { appId: app.id, error: String(err) }),
        );
      }
    });
  }
}

/** The first watchlist events after sign-in: which watched users are online, which offline. */
function sendInitialWatchlist(ws: ClientSocket, watched: readonly string[], onlineIds: readonly string[]): void {
  const onlineNow = new Set(onlineIds);
  const online = watched.filter((id) => onlineNow.has(id));
  const offline = watched.filter((id) => !onlineNow.has(id));
  const initial: { name: 'online' | 'offline'; user_ids: string[] }[] = [];
  if (online.length > 0) initial.push({ name: 'online', user_ids: online });
  if (offline.length > 0) initial.push({ name: 'offline', user_ids: offline });
  if (initial.length > 0) ws.send(frames.watchlistEvents(initial));
}

/** `data` as an object: pusher-js sends an object; some clients send it JSON-encoded. */
function dataObject(data: unknown): Record<string, unknown> | null {
  if (typeof data === 'string') {
    try {
      data = JSON.parse(data);
    } catch {
      return null;
    }
  }
  return isObject(data) ? data : null;
}

/** The presence member from signed channel_data: `{user_id, user_info?}`. */
/** A user id as sent: a string as is, a finite number as its decimal string (JSON numbers from integer ids). */
function userIdOf(raw: unknown): unknown {
  return typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : raw;
}

function parseMember(channelData: string): { userId: string; userInfo: unknown } | HeraldError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(channelData);
  } catch {
    return new HeraldError('SUBSCRIPTION_BAD_CHANNEL_DATA', 'channel_data is not valid JSON');
  }
  if (!isObject(parsed)) return new HeraldError('SUBSCRIPTION_BAD_CHANNEL_DATA');
  const userId = userIdOf(parsed.user_id);
  if (typeof userId !== 'string' || !isValidUserId(userId)) {
    return new HeraldError('SUBSCRIPTION_BAD_CHANNEL_DATA', `channel_data.user_id must be a string of 1 to ${MAX_USER_ID_LENGTH} characters (well-formed UTF-16)`);
  }
  return { userId, userInfo: parsed.user_info ?? null };
}

/** verifyAuth with the app's secret, or with its previous one while a rotation's grace period lasts. */
function verifyAppAuth(app: AppConfig, auth: unknown, input: string): boolean {
  if (verifyAuth(app.key, app.secret, auth, input)) return true;
  const previous = graceSecret(app);
  return previous !== undefined && verifyAuth(app.key, previous, auth, input);
}

function wantsClientEvents(app: AppConfig): boolean {
  return app.webhooks.some((w) => w.events.includes('client_event'));
}
