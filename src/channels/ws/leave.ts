/**
 * A connection's departure: it leaves the registry and every channel, whether it closed
 * (socket-events.ts) or is let go as a slow consumer (slow-consumers.ts). Each step runs on its
 * own, so that whatever fails it still leaves the registry and every channel (no member or
 * subscriber left behind): the registry, the watchlist's offline event when it was its user's
 * last connection, its channels (subscriptions.ts), the cluster's connection count; the debug
 * tap hears of the close (with its code) after those steps.
 */
import type { DebugTap } from '../../debug-tap/tap.js';
import { describeError as describe, log } from '../../log.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import type { SocketRegistry, SocketState } from '../socket-registry.js';
import type { Subscriptions } from './subscriptions.js';

export interface LeaveDeps {
  readonly registry: SocketRegistry;
  readonly adapter: ChannelAdapter;
  readonly subscriptions: Subscriptions;
  readonly debug: DebugTap;
}


/** The connection leaves the registry and every channel; `code` is the close code the debug tap is told. */
export type Leave = (state: SocketState, code: number) => void;

/** This node's Leave (the adapter's cluster capability read once). */
export function leaving(deps: LeaveDeps): Leave {
  const { registry, adapter, subscriptions, debug } = deps;
  const cluster = adapter.cluster;
  return (state, code) => {
    state.closed = true;
    state.ws = null;
    const userId = state.userId;
    let wentOffline = false;
    try {
      wentOffline = registry.remove(state);
    } catch (err) {
      log.error('websocket close: registry removal failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      if (userId !== null && wentOffline) adapter.userPresence(state.app.id, userId, false);
    } catch (err) {
      log.error('websocket close: watchlist offline event failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      subscriptions.closed(state);
    } catch (err) {
      log.error('websocket close: leaving channels failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      cluster?.disconnected(state.app.id, state.socketId);
    } catch (err) {
      log.error('websocket close: adapter disconnect failed', { appId: state.app.id, error: describe(err) });
    }
    debug.connectionClosed(state.app.id, state.socketId, code);
  };
}
