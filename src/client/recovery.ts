/**
 * Connection recovery for pusher-js clients of Herald (and so for Laravel Echo, through
 * `Echo.connector.pusher`): `withRecovery(pusher)` makes the client get, after a reconnect, the
 * events published on its history channels (apps[].history) while it was away.
 *
 * It remembers the last `serial` seen per channel (pusher-js drops unknown fields while decoding
 * a frame, so the serial is read from the transport's raw message, which pusher-js dispatches
 * just before it decodes it), adds `since` to the `pusher:subscribe` pusher-js sends again after a
 * reconnect, and drops an event whose serial it has already seen. Herald then sends the missed
 * events, then `herald:recovered` `{missed}` (or `herald:recovery_failed` `{reason}` when its
 * history no longer reaches back), on the channel: bind them like any event.
 *
 * pusher-js gets a new socket id at each reconnect. Herald does not send a client event back to
 * its sender, nor a trigger to its `socket_id` (Laravel's `toOthers()`), and keeps that socket
 * with the event: so that the replay leaves them out too, the subscribe also carries
 * `previous_socket_ids`, the socket ids the client had since the serial it recovers from (the
 * newest MAX_PREVIOUS_SOCKET_IDS).
 *
 * Dependency-free, runs in browsers and Node; it touches only pusher-js members that version 8
 * has (`send_event`, `subscribe`, `allChannels`, `connection`, a channel's `handleEvent`).
 */

/** The parts of a pusher-js client this plugin uses. */
interface PusherLike {
  send_event(event: string, data: unknown, channel?: string): boolean;
  subscribe(name: string): ChannelLike;
  allChannels(): ChannelLike[];
  connection: {
    bind(event: string, callback: () => void): unknown;
    /** The current connection's socket id (set once connected). */
    socket_id?: string;
    /** The live connection (pusher-js internal): its transport emits the raw messages. */
    connection?: { transport?: TransportLike | null } | null;
  };
}

interface ChannelLike {
  name: string;
  handleEvent(event: { event: string; channel?: string; data?: unknown }): void;
}

interface TransportLike {
  bind_global(callback: (event: string, data: unknown) => void): unknown;
}

/** What withRecovery adds to the client, for the application and for tests. */
export interface Recovery {
  /** The last serial seen on a channel, or undefined. */
  lastSerial(channel: string): string | undefined;
}

const HOOKED = Symbol.for('herald.recovery');

/** Most socket ids a recovering subscribe names: Herald's bound (history/previous-sockets.ts). */
const MAX_PREVIOUS_SOCKET_IDS = 8;

/** The last serial seen on a channel, and the ordinal of the connection that saw it (1, 2, ...). */
interface Seen {
  serial: string;
  connection: number;
}

/**
 * Turns recovery on for a pusher-js client (pusher-js 8; Laravel Echo: `Echo.connector.pusher`).
 * Call it once, right after creating the client; channels subscribed before are covered too.
 * Answers the same client.
 */
export function withRecovery<P>(pusher: P): P & { recovery: Recovery } {
  const client = pusher as unknown as PusherLike & { [HOOKED]?: Recovery; recovery?: Recovery };
  if (client[HOOKED]) return pusher as P & { recovery: Recovery };
  const last = new Map<string, Seen>();
  /** The socket ids this client had, oldest first (the newest MAX_PREVIOUS_SOCKET_IDS + 1), and how many it had in all. */
  const sockets: string[] = [];
  let connections = 0;
  /** The ordinal of the current connection, counting its socket id in when it is new. */
  const currentConnection = (): number => {
    const id = client.connection.socket_id;
    if (typeof id === 'string' && id !== '' && sockets[sockets.length - 1] !== id) {
      sockets.push(id);
      connections++;
      if (sockets.length > MAX_PREVIOUS_SOCKET_IDS + 1) sockets.shift();
    }
    return connections;
  };
  /** The socket ids of connection `from` and those after it, the current one aside (the newest MAX_PREVIOUS_SOCKET_IDS). */
  const previousSince = (from: number): string[] => {
    const first = currentConnection() - sockets.length + 1;
    const now = client.connection.socket_id;
    return sockets.slice(Math.max(0, from - first)).filter((id) => id !== now).slice(-MAX_PREVIOUS_SOCKET_IDS);
  };
  /** The serial of the message being dispatched now (set from its raw text, read by its channel). */
  let dispatching: { channel: string; serial: string } | null = null;

  // 1. Read each message's serial from the raw text, before pusher-js decodes and dispatches it.
  const hooked = new WeakSet<object>();
  const hookTransport = (): void => {
    const transport = client.connection.connection?.transport;
    if (!transport || hooked.has(transport)) return;
    hooked.add(transport);
    transport.bind_global((event, message) => {
      if (event !== 'message') return;
      dispatching = null;
      const text = (message as { data?: unknown } | null)?.data;
      if (typeof text !== 'string' || !text.includes('"serial"')) return;
      try {
        const frame = JSON.parse(text) as { channel?: unknown; serial?: unknown };
        if (typeof frame.channel === 'string' && typeof frame.serial === 'string') dispatching = { channel: frame.channel, serial: frame.serial };
      } catch {
        // pusher-js reports unreadable messages itself
      }
    });
  };
  client.connection.bind('connecting', hookTransport);
  client.connection.bind('connected', () => {
    hookTransport();
    currentConnection();
  });
  hookTransport();

  // 2. Drop what was already seen; remember the last serial.
  const wrapChannel = (channel: ChannelLike): void => {
    const marked = channel as ChannelLike & { [HOOKED]?: true };
    if (marked[HOOKED]) return;
    marked[HOOKED] = true;
    const handle = channel.handleEvent.bind(channel);
    channel.handleEvent = (event) => {
      const tagged = dispatching !== null && dispatching.channel === channel.name ? dispatching.serial : undefined;
      if (tagged !== undefined) {
        const seen = last.get(channel.name);
        if (seen !== undefined && tagged <= seen.serial) return;
        last.set(channel.name, { serial: tagged, connection: currentConnection() });
      }
      handle(event);
    };
  };
  for (const channel of client.allChannels()) wrapChannel(channel);
  const subscribe = client.subscribe.bind(client);
  client.subscribe = (name) => {
    const channel = subscribe(name);
    wrapChannel(channel);
    return channel;
  };

  // 3. A subscribe of a channel seen before asks for what came after, naming the socket ids the
  // client had since (events left out for them are left out of the replay); an unsubscribe
  // forgets it.
  const send = client.send_event.bind(client);
  client.send_event = (event, data, channel) => {
    const target = (data as { channel?: unknown } | null)?.channel;
    if (typeof target === 'string') {
      if (event === 'pusher:subscribe') {
        const seen = last.get(target);
        if (seen !== undefined) {
          const previous = previousSince(seen.connection);
          data = previous.length > 0 ? { ...(data as object), since: seen.serial, previous_socket_ids: previous } : { ...(data as object), since: seen.serial };
        }
      } else if (event === 'pusher:unsubscribe') {
        last.delete(target);
      }
    }
    return send(event, data, channel);
  };

  const recovery: Recovery = { lastSerial: (channel) => last.get(channel)?.serial };
  client[HOOKED] = recovery;
  client.recovery = recovery;
  return pusher as P & { recovery: Recovery };
}
