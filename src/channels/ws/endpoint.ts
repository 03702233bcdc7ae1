/** The WebSocket endpoint `/app/<key>` (Pusher protocol 7) and the local channel adapter. */
import type { ServerContext } from '../../server-context.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';

export interface WebSocketEndpoint {
  adapter: ChannelAdapter;
  /** Closes every connection with the code (4200 on shutdown). */
  closeAll(code: number, reason: string): void;
  connectionCount(): number;
}

export function registerWebSocket(ctx: ServerContext): WebSocketEndpoint {
  const notYet = (): never => {
    throw new Error('channels not implemented');
  };
  ctx.app.ws('/*', {});
  return {
    adapter: {
      publish: notYet, storeCachedEvent: notYet, subscribe: notYet, unsubscribe: notYet, channelInfo: notYet,
      listChannels: notYet, presenceUserIds: notYet, terminateUserConnections: notYet, hasSocket: notYet,
    },
    closeAll: () => undefined,
    connectionCount: () => 0,
  };
}
