/**
 * GET /admin/v1/apps/:appId/channels/:channel: the dashboard's channel page. The channel's
 * subscribers (or members) and, when the app keeps history for it (apps[].history), its last
 * kept events read from the channel's owner through the adapter, as the history API reads them;
 * the page has only the admin token, not the app's secret to sign that API. Event data is cut
 * to DATA_PREVIEW_CHARS: the page shows a preview, the history API the whole event.
 */
import { HeraldError } from '../errors.js';
import type { AppConfig } from '../config/schema.js';
import type { Reply, RequestContext } from '../http/uws-http.js';
import type { ServerContext } from '../server-context.js';
import { isPresenceChannel, isValidChannelName } from '../channels/names.js';
import { keepsHistory } from '../channels/history/patterns.js';

/** Kept events answered unless `limit` says otherwise, and the most. */
export const CHANNEL_VIEW_EVENTS = 50;
export const CHANNEL_VIEW_MAX_EVENTS = 500;
/** Characters of each event's data answered; longer data is cut and marked `dataTruncated`. */
export const DATA_PREVIEW_CHARS = 200;

export async function channelView(ctx: Pick<ServerContext, 'channels'>, app: AppConfig, rc: RequestContext): Promise<Reply> {
  const channel = rc.params.channel ?? '';
  if (!isValidChannelName(channel)) throw new HeraldError('INVALID_CHANNEL_NAME', `'${channel.slice(0, 210)}' is not a valid channel name`);
  const text = new URLSearchParams(rc.query).get('limit');
  const limit = text === null ? CHANNEL_VIEW_EVENTS : Number(text);
  if (!Number.isInteger(limit) || limit < 1 || limit > CHANNEL_VIEW_MAX_EVENTS) {
    throw new HeraldError('INVALID_PARAMETERS', `limit must be an integer from 1 to ${CHANNEL_VIEW_MAX_EVENTS}`);
  }
  const presence = isPresenceChannel(channel);
  const kept = keepsHistory(app, channel);
  const [info, read] = await Promise.all([
    ctx.channels.channelInfo(app.id, channel, presence ? { userCount: true } : { subscriptionCount: true }),
    kept ? ctx.channels.history(app.id, channel, undefined, limit) : null,
  ]);
  return {
    status: 200,
    body: {
      channel,
      occupied: info.occupied,
      ...(presence ? { userCount: info.userCount ?? 0 } : { subscriptionCount: info.subscriptionCount ?? 0 }),
      historyChannels: app.history?.channels ?? null,
      history:
        read === null || app.history === null
          ? null
          : {
              maxEvents: app.history.maxEvents,
              ttlSeconds: app.history.ttlSeconds,
              complete: read.complete,
              events: read.events.map((e) => {
                const cut = e.data.length > DATA_PREVIEW_CHARS;
                return {
                  serial: e.serial,
                  event: e.event,
                  publishedAt: new Date(e.publishedAt).toISOString(),
                  data: cut ? previewOf(e.data) : e.data,
                  dataBytes: Buffer.byteLength(e.data),
                  dataTruncated: cut,
                  ...(e.userId !== undefined && { userId: e.userId }),
                };
              }),
            },
    },
  };
}

/** The first DATA_PREVIEW_CHARS characters, never half of a surrogate pair. */
function previewOf(data: string): string {
  const end = /[\uD800-\uDBFF]/.test(data[DATA_PREVIEW_CHARS - 1] ?? '') ? DATA_PREVIEW_CHARS - 1 : DATA_PREVIEW_CHARS;
  return data.slice(0, end);
}
