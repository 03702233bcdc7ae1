/**
 * The per-app bound on cached last events (apps[].maxCacheBytes): many distinct cache channels
 * keep at most the bound, the oldest written evicted first; another app is untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, HeraldProcess, appConfig, startHerald } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';

const OTHER_APP = { id: 'other-app', key: 'other-key', secret: 'other-secret' };
const DATA = 'x'.repeat(10_000);
const ENTRY_BYTES = 'cache-bound-00'.length + 'e'.length + DATA.length;
/** Room for exactly 5 entries (one shard holds the whole bound). */
const MAX_CACHE_BYTES = 5 * ENTRY_BYTES;

let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({
    shards: 1,
    config: { apps: [appConfig({ maxCacheBytes: MAX_CACHE_BYTES }), { ...OTHER_APP }] },
  });
});

afterAll(async () => {
  await herald?.dispose();
});

async function cachedData(app: typeof DEFAULT_APP | typeof OTHER_APP, channel: string): Promise<string | null> {
  const res = await channelsSdk(herald.port, app).get({ path: `/channels/${channel}`, params: { info: 'cache' } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { cache: { data: string } | null };
  return body.cache?.data ?? null;
}

describe('cache channels', () => {
  it('keep at most maxCacheBytes per app, evicting the oldest written first', async () => {
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const other = channelsSdk(herald.port, OTHER_APP);
    const names = Array.from({ length: 20 }, (_, i) => `cache-bound-${String(i).padStart(2, '0')}`);
    await other.trigger('cache-bound-00', 'e', DATA);
    for (const channel of names) expect((await sdk.trigger(channel, 'e', DATA)).status).toBe(200);

    const kept = await Promise.all(names.map((c) => cachedData(DEFAULT_APP, c)));
    // Room for 5 entries: the last 5 written are kept.
    expect(kept.map((d) => d !== null)).toEqual(names.map((_, i) => i >= 15));
    expect(kept[19]).toBe(DATA);
    expect(await cachedData(OTHER_APP, 'cache-bound-00')).toBe(DATA);
  });
});
