/**
 * Channel listings (C3) are bounded per node: LISTINGS_BUILDING are built at once, up to
 * LISTINGS_WAITING_PER_APP more of one app wait their turn, and the app's next one is refused
 * at once with 503 CHANNEL_LISTING_BUSY and Retry-After, while another app's listing still
 * gets its turn. The one shard is stalled (test hook) while the listings arrive, so none can
 * finish before the last one is in, whatever the speed of the machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTINGS_BUILDING, LISTINGS_WAITING_PER_APP } from '../../src/channels/http-api/listing-gate.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { nextPusherEvent } from '../helpers/channel-clients.js';
import { pusherJsClient, type ChannelsCreds, type PusherJsClient } from '../helpers/sdk-clients.js';
import { signedQuery } from '../helpers/signed-request.js';
import { sleep } from '../helpers/wait.js';

const BUSY = { id: 'busy-app', key: 'busy-key', secret: 'busy-secret' };
const QUIET = { id: 'quiet-app', key: 'quiet-key', secret: 'quiet-secret' };
const CHANNELS = ['gamma', 'alpha', 'beta-channel'];
/** How long the shard is stalled while the listings arrive (ms). */
const STALL_MS = 5000;
/** Listings of BUSY beyond what is built and what may wait. */
const REFUSED = 3;

let herald: HeraldProcess;
let client: PusherJsClient;

beforeAll(async () => {
  herald = await startHerald({
    shards: 1,
    env: { HERALD_TEST_HOOKS: '1' },
    // Listings wait out the stall rather than time out.
    config: { apps: [BUSY, QUIET], shardRequestTimeoutMs: 30_000 },
  });
  client = pusherJsClient(herald.port, BUSY.key);
  await Promise.all(CHANNELS.map((name) => nextPusherEvent(client.subscribe(name), 'pusher:subscription_succeeded')));
});
afterAll(async () => {
  client?.disconnect();
  await herald?.dispose();
});

async function listing(app: ChannelsCreds): Promise<{ status: number; retryAfter: string | null; body: Record<string, unknown> }> {
  const path = `/apps/${app.id}/channels`;
  const res = await fetch(`${herald.baseUrl}${path}?${signedQuery(app, 'GET', path)}`);
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown> };
}

describe('concurrent channel listings', () => {
  it('builds a bounded number at once, queues a bounded number per app, and refuses the rest of that app with 503', async () => {
    const stall = fetch(`${herald.baseUrl}/debug/shards/0/stall?stall_ms=${STALL_MS}`, { method: 'POST' });
    // time: 300 ms of the 5 s stall for the stall to reach the shard before the listings (nothing outside the stalled shard tells when it began).
    await sleep(300);
    const busy = Array.from({ length: LISTINGS_BUILDING + LISTINGS_WAITING_PER_APP + REFUSED }, () => listing(BUSY));
    const quiet = listing(QUIET);
    const answers = await Promise.all(busy);
    expect((await stall).status).toBe(200);

    const refused = answers.filter((a) => a.status !== 200);
    expect(refused.length, JSON.stringify(refused)).toBe(REFUSED);
    for (const a of refused) {
      expect(a.status).toBe(503);
      expect(a.body.code).toBe('CHANNEL_LISTING_BUSY');
      expect(a.retryAfter).toBe('1');
    }
    // Every listing let through is whole, in name order.
    for (const a of answers.filter((x) => x.status === 200)) {
      expect(Object.keys(a.body.channels as object)).toEqual([...CHANNELS].sort());
      expect(a.body.channels).toEqual({ alpha: {}, gamma: {}, 'beta-channel': {} });
    }
    // Another app's listing waited its turn beside the busy app's, and was answered.
    expect(await quiet).toMatchObject({ status: 200, body: { channels: {} } });
    // Once they are done, the busy app lists again.
    expect(await listing(BUSY)).toMatchObject({ status: 200 });
  }, 60_000);
});
