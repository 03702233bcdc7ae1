/**
 * The debug tap: the few points where the channel front end tells the debug hub what happened
 * (connections, subscriptions, events, publishes). The dashboard's debug console shows them.
 *
 * Cost: every call first asks whether a dashboard watches the app (one Set lookup on a usually
 * empty set); nothing is built or copied otherwise. Events of a watched app are sampled under
 * load (see admin/debug-hub.ts). The debug hub is the implementation; the rest of the server
 * sees only this interface, handed to it in the ServerContext (the channel adapter gets it
 * through `tapSubscriptions`). It sits below every area and imports none but type-only messages.
 */
import type { PublishJob } from '../push/messages/publishes.js';

/** Longest data preview of an event, characters: the console shows the start of the data. */
export const DATA_PREVIEW_CHARS = 300;

/** What the debug console shows, as sent to the page (docs/admin-api.md "Stream"). */
export type DebugEvent =
  | { kind: 'connection'; action: 'opened'; socketId: string }
  | { kind: 'connection'; action: 'closed'; socketId: string; code: number }
  | { kind: 'subscription'; action: 'subscribed' | 'unsubscribed'; channel: string; socketId: string; subscriptionCount: number }
  | { kind: 'api_event'; channels: string[]; event: string; data: string; dataBytes: number; socketId?: string }
  | { kind: 'client_event'; channel: string; event: string; data: string; dataBytes: number; socketId: string; userId?: string }
  | { kind: 'webhook'; url: string; events: string[]; ok: boolean; status?: number; error?: string };

export interface DebugTap {
  /** True while a dashboard watches the app's debug console: only then is an event worth building. */
  watching(appId: string): boolean;
  /** A connection was accepted (after the app's limits). */
  connectionOpened(appId: string, socketId: string): void;
  /** A connection closed, with the WebSocket close code. */
  connectionClosed(appId: string, socketId: string, code: number): void;
  /** A subscription was recorded (`subscribed`) or removed (`unsubscribed`) on the channel's shard. */
  subscription(appId: string, action: 'subscribed' | 'unsubscribed', channel: string, socketId: string, subscriptionCount: number): void;
  /** An event triggered through the HTTP API (or the dashboard's event creator), published to `channels`. */
  apiEvent(appId: string, channels: readonly string[], event: string, data: string, socketId?: string): void;
  /** A client event relayed by a connection. */
  clientEvent(appId: string, channel: string, event: string, data: string, socketId: string, userId?: string): void;
  /** A push publish was accepted (stored on every shard): the push view lists recent ones. */
  publishAccepted(job: Readonly<PublishJob>): void;
}

/** The start of the data, for the console. */
export function dataPreview(data: string): string {
  return data.length <= DATA_PREVIEW_CHARS ? data : `${data.slice(0, DATA_PREVIEW_CHARS)}…`;
}
