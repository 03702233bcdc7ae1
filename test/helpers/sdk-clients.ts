/**
 * The official client libraries pointed at a test Herald over plain HTTP/WS on 127.0.0.1:
 * pusher-js (browser client), `pusher` (Channels server SDK) and the Beams server SDK.
 * Only the connection settings live here; each test adds its own auth handlers and options.
 */
import PushNotifications from '@pusher/push-notifications-server';
import PusherServer from 'pusher';
import PusherJs from 'pusher-js';
import { DEFAULT_PUSH } from './herald-process.js';

/** pusher-js is CommonJS: under NodeNext its default import is the constructor itself at run time. */
const PusherJsClass = PusherJs as unknown as typeof PusherJs.default;
/** A pusher-js client. */
export type PusherJsClient = InstanceType<typeof PusherJs.default>;
/** pusher-js constructor options other than the connection settings pusherJsClient() fixes. */
export type PusherJsOptions = Omit<ConstructorParameters<typeof PusherJs.default>[1], 'cluster'>;

/**
 * A pusher-js client for app `key` on Herald's WebSocket `port`: plain ws only, no stats
 * beacon; `options` (auth handlers and the like) are added to those settings.
 */
export function pusherJsClient(port: number, key: string, options: PusherJsOptions = {}): PusherJsClient {
  return new PusherJsClass(key, { wsHost: '127.0.0.1', wsPort: port, forceTLS: false, enabledTransports: ['ws'], cluster: 'local', disableStats: true, ...options });
}

/** Credentials of a Channels app, as the tests' app constants spell them. */
export interface ChannelsCreds {
  readonly id: string;
  readonly key: string;
  readonly secret: string;
}

/** The `pusher` server SDK for `app` against Herald's HTTP `port` (plain HTTP); `options` are added. */
export function channelsSdk(port: number, app: ChannelsCreds, options: Partial<PusherServer.Options> = {}): PusherServer {
  return new PusherServer({ appId: app.id, key: app.key, secret: app.secret, host: '127.0.0.1', port: String(port), useTLS: false, ...options });
}

/**
 * The Beams server SDK against Herald's HTTP `port` (plain HTTP to `endpoint`). `port` is an
 * option the SDK reads (the port of its requests) but its type declarations omit.
 */
export function beamsSdk(port: number, instanceId: string = DEFAULT_PUSH.instanceId, secretKey: string = DEFAULT_PUSH.secretKey): PushNotifications {
  const options = { instanceId, secretKey, endpoint: '127.0.0.1', port };
  return new PushNotifications(options as PushNotifications.Options);
}
