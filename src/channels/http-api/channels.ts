/**
 * C3 GET /apps/<app_id>/channels, C4 GET /apps/<app_id>/channels/<channel_name> and
 * C6 GET /apps/<app_id>/channels/<channel_name>/users: channel state read through the
 * adapter. An attribute that does not apply to the channel is a 400 that says why.
 */
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import type { ChannelAdapter, OccupiedChannel } from '../adapter/channel-adapter.js';
import { channelType, isPresenceChannel, isValidChannelName } from '../names.js';
import { parseInfo, queryParams, rejectUnexpectedParams } from './params.js';
import type { ChannelApiRequest } from './request.js';
import type { ListingGate } from './listing-gate.js';

const NAME_RULE = '1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;';

/** A single string query parameter; a repeated `key[]` form is a 400. */
function stringParam(params: Record<string, string | string[]>, key: string): string | undefined {
  const value = params[key];
  if (Array.isArray(value)) throw new HeraldError('INVALID_PARAMETERS', `${key} must be a single value`);
  return value;
}

/** The `<channel_name>` of the path, validated. */
export function pathChannel(req: ChannelApiRequest): string {
  const channel = req.params.channelName ?? '';
  if (!isValidChannelName(channel)) {
    throw new HeraldError('INVALID_CHANNEL_NAME', `'${channel.slice(0, 210)}' is not a valid channel name: ${NAME_RULE}`);
  }
  return channel;
}

/**
 * C3: occupied channels, optionally by prefix; user_count only when limited to presence
 * channels. Built through `gate` (a bounded number at once per node) and written straight
 * into the answer's bytes.
 */
export async function listChannels(adapter: ChannelAdapter, req: ChannelApiRequest, gate: ListingGate): Promise<Reply> {
  const params = queryParams(req.query);
  const prefix = stringParam(params, 'filter_by_prefix') || undefined;
  if (prefix !== undefined && !isValidChannelName(prefix)) {
    throw new HeraldError('INVALID_PARAMETERS', `filter_by_prefix '${prefix.slice(0, 210)}' cannot start a channel name: ${NAME_RULE}`);
  }
  const info = parseInfo(stringParam(params, 'info'), ['user_count'], 'info');
  const withUserCount = info.has('user_count');
  if (withUserCount && !prefix?.startsWith('presence-')) {
    throw new HeraldError('INFO_NOT_APPLICABLE', 'info=user_count is only available for presence channels: add filter_by_prefix=presence-');
  }
  return gate.run(req.app.id, async () => ({ status: 200, body: channelListBody(await adapter.listChannels(req.app.id, prefix, withUserCount)) }));
}

/** Channel names that JSON carries as they are (every valid name; anything else is escaped). */
const JSON_PLAIN = /^[A-Za-z0-9_\-=@,.;]*$/;

/**
 * `{"channels":{"<name>":{},…}}` (`{"user_count":n}` where a row has one) as one buffer sized
 * beforehand: no object per channel and no intermediate text, whatever the number of rows.
 */
export function channelListBody(rows: readonly OccupiedChannel[]): Buffer {
  const keyText = (channel: string): string => (JSON_PLAIN.test(channel) ? channel : JSON.stringify(channel).slice(1, -1));
  const head = '{"channels":{';
  const tail = '}}';
  const count = (row: OccupiedChannel): string => (row.userCount === undefined ? '{}' : `{"user_count":${row.userCount}}`);
  let size = head.length + tail.length + Math.max(0, rows.length - 1);
  for (const row of rows) size += Buffer.byteLength(keyText(row.channel)) + 3 + count(row).length;
  const out = Buffer.allocUnsafe(size);
  let at = out.write(head, 0, 'latin1');
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    if (i > 0) at = out.writeUInt8(0x2c, at);
    at = out.writeUInt8(0x22, at);
    at += out.write(keyText(row.channel), at, 'utf8');
    at += out.write('":', at, 'latin1');
    at += out.write(count(row), at, 'latin1');
  }
  out.write(tail, at, 'latin1');
  return out;
}

/** C4: `occupied`, plus each requested attribute the channel supports (400 for the others). */
export async function channelInfo(adapter: ChannelAdapter, req: ChannelApiRequest): Promise<Reply> {
  const { app } = req;
  const channel = pathChannel(req);
  const info = parseInfo(stringParam(queryParams(req.query), 'info'), ['user_count', 'subscription_count', 'cache'], 'info');
  const presence = isPresenceChannel(channel);
  const userCount = info.has('user_count');
  const subscriptionCount = info.has('subscription_count');
  const cache = info.has('cache');
  if (userCount && !presence) {
    throw new HeraldError('INFO_NOT_APPLICABLE', `user_count is only available for presence channels; '${channel}' is not one`);
  }
  if (subscriptionCount && presence) {
    throw new HeraldError('INFO_NOT_APPLICABLE', `subscription_count is not available for presence channels such as '${channel}'; ask for user_count`);
  }
  if (subscriptionCount && !app.subscriptionCount) {
    throw new HeraldError('INFO_NOT_APPLICABLE', `subscription_count is not enabled for app ${app.id} (set subscriptionCount: true in its configuration)`);
  }
  if (cache && !channelType(channel).cache) {
    throw new HeraldError(
      'INFO_NOT_APPLICABLE',
      `cache is only available for cache channels (cache-, private-cache-, private-encrypted-cache-, presence-cache-); '${channel}' is not one`,
    );
  }
  const state = await adapter.channelInfo(app.id, channel, { userCount, subscriptionCount, cache });
  const body: Record<string, unknown> = { occupied: state.occupied };
  if (userCount) body.user_count = state.userCount ?? 0;
  if (subscriptionCount) body.subscription_count = state.subscriptionCount ?? 0;
  if (cache) body.cache = state.cache ?? null;
  return { status: 200, body };
}

/** C6: the user ids of a presence channel. */
export async function presenceUsers(adapter: ChannelAdapter, req: ChannelApiRequest): Promise<Reply> {
  const channel = pathChannel(req);
  rejectUnexpectedParams(queryParams(req.query), [], 'GET /apps/<app_id>/channels/<channel_name>/users');
  if (!isPresenceChannel(channel)) {
    throw new HeraldError('NOT_PRESENCE_CHANNEL', `'${channel}' is not a presence channel: only presence- channels have users`);
  }
  const ids = await adapter.presenceUserIds(req.app.id, channel);
  return { status: 200, body: { users: ids.map((id) => ({ id })) } };
}
