/**
 * A cluster keeps no channel history yet: an app asking for it through the admin API is refused
 * with 422 naming apps[].history, as the config file refuses it (test/unit/config/history.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';

const TOKEN = 'cluster-history-token-0123456789';
const APP = { id: 'chist-app', key: 'chist-key', secret: 'chist-secret' };
const bed = heraldClusterBed('chist');

describe.skipIf(ONE_PROCESS)('channel history in a cluster', () => {
  it('is refused through the admin API, naming the field; an app without it is created', async () => {
    const cluster = await bed.start({ apps: [APP], config: { admin: { token: TOKEN } } });
    const create = (body: Record<string, unknown>): Promise<Response> =>
      fetch(`${cluster.a.baseUrl}/admin/v1/apps`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const refused = await create({ id: 'chist-new', key: 'chist-new-key', history: { channels: ['history-*'] } });
    expect(refused.status).toBe(422);
    const body = (await refused.json()) as { code: string; error: string };
    expect(body.code).toBe('ADMIN_INVALID_TENANT');
    expect(body.error).toContain('apps[].history is not available in a cluster yet');
    expect((await create({ id: 'chist-new', key: 'chist-new-key' })).status).toBe(201);
  }, 60_000);
});
