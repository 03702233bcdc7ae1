/** C5 POST /apps/<app_id>/users/<user_id>/terminate_connections. */
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { postParams, rejectUnexpectedParams } from './params.js';
import type { ChannelApiRequest } from './request.js';

/**
 * Closes every connection on this node where the user signed in (pusher:signin). The user
 * may reconnect. Takes no parameters (the SDK sends an empty JSON object).
 */
export async function terminateUserConnections(adapter: ChannelAdapter, req: ChannelApiRequest): Promise<Reply> {
  const userId = req.params.userId ?? '';
  if (userId === '') throw new HeraldError('INVALID_PARAMETERS', 'user id missing from the path');
  rejectUnexpectedParams(postParams(req.query, req.body), [], 'POST /apps/<app_id>/users/<user_id>/terminate_connections');
  await adapter.terminateUserConnections(req.app.id, userId);
  return { status: 200, body: {} };
}
