/**
 * A connection or channel API request naming an app key no app has: usually a client or
 * server SDK left pointing at the wrong app, or a key removed by a reload. Logged at info,
 * once per key and minute (the others of that minute are counted in the next line).
 */
import { RateLimitedLog } from '../log.js';

const unknownKeys = new RateLimitedLog('info', 60_000);

/** Logs one use of the unknown `key` (clipped to 100 characters) through `via`. */
export function logUnknownAppKey(key: string, via: 'websocket' | 'channel API'): void {
  const clipped = key.slice(0, 100);
  unknownKeys.write(clipped, `${via}: no app has key '${clipped}' (apps[].key)`, { key: clipped, via });
}
