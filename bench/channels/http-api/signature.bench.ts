/**
 * The channel API request signature check (src/channels/http-api/signature.ts) on a typical
 * C1 trigger signed like the `pusher` SDK: query parsing, body MD5, HMAC-SHA256, constant-time
 * compare.
 */
import { createHash, createHmac } from 'node:crypto';
import { parseQueryPairs } from '../../../src/channels/http-api/params.js';
import { authenticateRequest } from '../../../src/channels/http-api/signature.js';
import { DEFAULT_APP, configSchema } from '../../../src/config/schema.js';
import type { MicroSuite } from '../../micro-suite.js';

const config = configSchema.parse({ apps: [{ ...DEFAULT_APP }] });
const app = config.apps[0]!;
const path = `/apps/${app.id}/events`;
const body = Buffer.from(JSON.stringify({ name: 'new-message', channel: 'private-chat-room-7', data: JSON.stringify({ message: 'hello world', from: 'user-42' }) }));

function signedQuery(timestamp: number): string {
  const params = `auth_key=${app.key}&auth_timestamp=${timestamp}&auth_version=1.0&body_md5=${createHash('md5').update(body).digest('hex')}`;
  const signature = createHmac('sha256', app.secret).update(`POST\n${path}\n${params}`).digest('hex');
  return `${params}&auth_signature=${signature}`;
}

export const suite: MicroSuite = {
  source: 'src/channels/http-api/signature.ts',
  setup(bench) {
    const now = Date.now();
    const query = signedQuery(Math.floor(now / 1000));
    const appsByKey = new Map([[app.key, app]]);
    const request = () => ({ method: 'post', path, query: parseQueryPairs(query), body, appId: app.id });
    authenticateRequest(request(), appsByKey, now); // throws if the bench signs wrongly
    bench.add('parse query + authenticateRequest (C1, 120 B body)', () => {
      authenticateRequest(request(), appsByKey, now);
    });
  },
};
