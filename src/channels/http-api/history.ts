/**
 * GET /apps/<app_id>/channels/<channel_name>/history: a history channel's kept events
 * (apps[].history), read from the channel's owner. `since` (a serial) answers the events after
 * it, oldest first; without it, the last `limit`. `complete` is false when events after `since`
 * were evicted, or `limit` cut the answer. A channel the app keeps no history for is a 404
 * that names apps[].history.
 */
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { keepsHistory } from '../history/patterns.js';
import { parseSerial } from '../history/serial.js';
import { pathChannel } from './channels.js';
import { queryParams, rejectUnexpectedParams } from './params.js';
import type { ChannelApiRequest } from './request.js';

/** Events answered when the request gives no `limit`. */
export const DEFAULT_HISTORY_LIMIT = 100;
/** The largest `limit` accepted. */
export const MAX_HISTORY_LIMIT = 10_000;

const ROUTE = 'GET /apps/<app_id>/channels/<channel_name>/history';

export async function channelHistory(adapter: ChannelAdapter, req: ChannelApiRequest): Promise<Reply> {
  const { app } = req;
  const channel = pathChannel(req);
  const params = queryParams(req.query);
  rejectUnexpectedParams(params, ['since', 'limit'], ROUTE);
  const since = single(params, 'since');
  const rawLimit = single(params, 'limit');
  if (since !== undefined && parseSerial(since) === null) {
    throw new HeraldError('INVALID_PARAMETERS', `since '${since.slice(0, 40)}' is not a serial: give the "serial" of an event as received (<13 digits>-<12 digits>)`);
  }
  let limit = DEFAULT_HISTORY_LIMIT;
  if (rawLimit !== undefined) {
    limit = /^\d{1,6}$/.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= MAX_HISTORY_LIMIT)) throw new HeraldError('INVALID_PARAMETERS', `limit must be a whole number from 1 to ${MAX_HISTORY_LIMIT}`);
  }
  if (!keepsHistory(app, channel)) {
    throw new HeraldError(
      'HISTORY_NOT_ENABLED',
      `App ${app.id} keeps no history for '${channel}': add a pattern naming it to apps[].history.channels (config file, or the admin API for an app created there)`,
    );
  }
  const read = await adapter.history(app.id, channel, since, limit);
  const events = read.events.map((e) => {
    const out: Record<string, unknown> = { serial: e.serial, event: e.event, data: e.data, published_at: e.publishedAt };
    if (e.userId !== undefined) out.user_id = e.userId;
    return out;
  });
  return { status: 200, body: { events, complete: read.complete } };
}

function single(params: Record<string, string | string[]>, key: string): string | undefined {
  const value = params[key];
  if (Array.isArray(value)) throw new HeraldError('INVALID_PARAMETERS', `${key} must be a single value`);
  return value;
}
