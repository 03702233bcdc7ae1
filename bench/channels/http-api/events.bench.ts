/**
 * The main-thread JavaScript of one C1 trigger (src/channels/http-api/events.ts behind
 * routes.ts `signedHandler`): query parsing, signature check, body parse, zod shape, rules,
 * quota, frame building and the adapter hand-off. The adapter here only counts publishes,
 * so the figure is Herald's own per-trigger cost without uWS or the socket writes; the
 * fan-out benchmark measures the rest.
 */
import { createHash, createHmac } from 'node:crypto';
import type { ChannelAdapter } from '../../../src/channels/adapter/channel-adapter.js';
import { triggerBatch, triggerEvent } from '../../../src/channels/http-api/events.js';
import { MessageQuota } from '../../../src/channels/quota.js';
import { signedHandler } from '../../../src/channels/http-api/routes.js';
import { DEFAULT_APP, configSchema } from '../../../src/config/schema.js';
import type { RequestContext } from '../../../src/http/uws-http.js';
import type { MicroSuite } from '../../micro-suite.js';

const app = configSchema.parse({ apps: [{ ...DEFAULT_APP }] }).apps[0]!;
const appsByKey = new Map([[app.key, app]]);

function request(path: string, payload: object): RequestContext {
  const body = Buffer.from(JSON.stringify(payload));
  const params = `auth_key=${app.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0&body_md5=${createHash('md5').update(body).digest('hex')}`;
  const signature = createHmac('sha256', app.secret).update(`POST\n${path}\n${params}`).digest('hex');
  return {
    method: 'post', path, query: `${params}&auth_signature=${signature}`, headers: { 'content-type': 'application/json' },
    params: { appId: app.id }, body, remoteAddress: '127.0.0.1',
  };
}

export const suite: MicroSuite = {
  source: 'src/channels/http-api/events.ts (via routes.ts signedHandler)',
  setup(bench) {
    let published = 0;
    const notUsed = (): never => {
      throw new Error('not used by a trigger without info');
    };
    const adapter: ChannelAdapter = {
      publish: () => void published++,
      storeCachedEvent: notUsed, clientEvent: notUsed, subscribe: notUsed, unsubscribe: notUsed, channelInfo: notUsed,
      listChannels: notUsed, occupiedChannelCounts: notUsed, presenceUserIds: notUsed, terminateUserConnections: notUsed,
      attach: notUsed, detach: notUsed, userPresence: notUsed, watch: notUsed, connectionCount: notUsed,
      onStateLost: notUsed, close: notUsed, publishKept: notUsed, history: notUsed, tapSubscriptions: notUsed, cluster: null,
    };
    const quota = new MessageQuota();
    const data = JSON.stringify({ message: 'hello world', from: 'user-42' });
    const one = request(`/apps/${app.id}/events`, { name: 'new-message', channel: 'chat-room-7', data });
    const batch = request(`/apps/${app.id}/batch_events`, {
      batch: Array.from({ length: 10 }, (_, i) => ({ name: 'new-message', channel: `chat-room-${i}`, data })),
    });
    const c1 = signedHandler({ appsByKey }, (r) => triggerEvent(adapter, quota, r));
    const c2 = signedHandler({ appsByKey }, (r) => triggerBatch(adapter, quota, r));
    for (const [name, handler, rc] of [['C1', c1, one], ['C2', c2, batch]] as const) {
      const reply = handler(rc);
      if (reply instanceof Promise || reply.status !== 200) throw new Error(`${name} warm-up did not answer 200: ${JSON.stringify(reply)}`);
    }
    bench.add('C1 trigger handler, 1 channel (auth → publish hand-off)', () => {
      c1(one);
    });
    bench.add('C2 batch handler, 10 events (auth → publish hand-off)', () => {
      c2(batch);
    });
    return { teardown: () => void published };
  },
};
