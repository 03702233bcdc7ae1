/**
 * C3 GET /apps/<app_id>/channels, C4 GET /apps/<app_id>/channels/<channel_name> and
 * C6 GET /apps/<app_id>/channels/<channel_name>/users: channel state read through the
 * adapter. An attribute that does not apply to the channel is a 400 that says why.
 */
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { channelType, isPresenceChannel, isValidChannelName } from '../names.js';
import { parseInfo, queryParams, rejectUnexpectedParams } from './params.js';
import type { ChannelApiRequest } from './request.js';

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

/** C3: occupied channels, optionally by prefix; user_count only when limited to presence channels. */
export async function listChannels(adapter: ChannelAdapter, req: ChannelApiRequest): Promise<Reply> {
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
  const rows = await adapter.listChannels(req.app.id, prefix, withUserCount);
  // Null prototype: `__proto__` is a valid channel name.
  const channels = Object.create(null) as Record<string, { user_count?: number }>;
  for (const { channel, userCount } of rows) channels[channel] = userCount === undefined ? {} : { user_count: userCount };
  return { status: 200, body: { channels } };
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
