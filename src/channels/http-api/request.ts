/** What a channel API handler receives once the request is authenticated. */
import type { AppConfig } from '../../config/schema.js';
import type { QueryPair } from './params.js';

export interface ChannelApiRequest {
  /** The app the request is signed for (enabled; its id is the path's app id). */
  readonly app: AppConfig;
  /** Decoded query pairs, authentication parameters included. */
  readonly query: readonly QueryPair[];
  /** Raw body bytes (empty for GET). */
  readonly body: Buffer;
  /** Route parameters, URL-decoded. */
  readonly params: Readonly<Record<string, string>>;
}
