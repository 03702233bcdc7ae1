/**
 * Disposable nodes for push publish (issue 23): three real Herald nodes with the same config
 * on one private redis-server and one private PostgreSQL. A publish to 5,000 devices is split
 * into partitions that every node claims and sends; the node sending the most is killed with
 * SIGKILL in the middle and its data dir deleted. The others take its partitions over once
 * their leases expire and finish the publish: every device is reached (the fake FCM counts),
 * the repeats are no more than herald_push_publish_resends_total counts, and the statistics are
 * answered, exact, by every node left.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS, type HeraldCluster } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { until } from '../helpers/wait.js';
import { DeviceApi, fcmToken } from './device-api-helpers.js';

const APP = { id: 'publish-failover-app', key: 'publish-failover-key', secret: 'publish-failover-secret' };
const INSTANCE = DEFAULT_PUSH.instanceId;
const DEVICES = 5000;
const bed = pushClusterBed('publish-failover');

/** Tokens the fake FCM accepted for the publish, each occurrence. */
function delivered(publishId: string): string[] {
  return bed.fakes.deliveredFor(publishId).fcm;
}

async function metric(node: HeraldProcess, name: string): Promise<number> {
  return series(parsePrometheus(await (await fetch(`${node.baseUrl}/metrics`)).text()), name);
}

async function stats(node: HeraldProcess, publishId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${node.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, {
    headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` },
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function inParallel<T>(items: readonly T[], width: number, work: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  }));
}

describe.skipIf(ONE_PROCESS)('a publish survives the node sending it (partitions with leases in PostgreSQL)', () => {
  it('SIGKILL of the busiest sender mid-publish, its data dir deleted: the others finish it, every device reached, repeats counted', async () => {
    const cluster: HeraldCluster = await bed.start({
      nodes: 3,
      apps: [APP],
      database: 'cluster_publish_failover',
      // A short lease so the test does not wait 15 s for the takeover; few sends in flight, so the publish lasts.
      cluster: { publishLeaseMs: 2000 },
      config: { pushDelivery: { concurrency: 8, checkpointEvery: 100 } },
    });
    const nodes = [cluster.a, cluster.b, cluster.c];
    const apis = nodes.map((n) => new DeviceApi(n.baseUrl, INSTANCE));
    const tokens = Array.from({ length: DEVICES }, (_, k) => fcmToken(`failover-${k}`));
    await inParallel(tokens, 48, async (token, k) => {
      const api = apis[k % 3]!;
      const id = await api.registerOk('fcm', token);
      const set = await apis[(k + 1) % 3]!.replaceInterests('fcm', id, ['everyone']);
      expect(set.status).toBe(200);
    });

    // Slow answers: the publish lasts several seconds, with every node sending.
    bed.fakes.fcm.delayMs = 40;
    const accepted = await fetch(`${cluster.a.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/interests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ interests: ['everyone'], fcm: { notification: { title: 'failover' } } }),
    });
    expect(accepted.status).toBe(200);
    const { publishId } = (await accepted.json()) as { publishId: string };

    await until(() => delivered(publishId).length >= DEVICES / 5, 'a fifth of the publish sent', 120_000);
    const sent = await Promise.all(nodes.map((n) => metric(n, 'herald_push_notifications_total')));
    expect(sent.filter((n) => n > 0).length, `sends per node ${sent.join(', ')}`).toBeGreaterThanOrEqual(2);
    const victim = nodes[sent.indexOf(Math.max(...sent))]!;
    await cluster.killNode(victim);
    rmSync(victim.dataDir, { recursive: true, force: true });
    const survivors = nodes.filter((n) => n !== victim);
    bed.fakes.fcm.delayMs = 0;

    await until(() => new Set(delivered(publishId)).size === DEVICES, 'every device reached', 180_000);
    const reached = delivered(publishId);
    expect(new Set(reached)).toEqual(new Set(tokens));
    const repeats = reached.length - DEVICES;
    // Statistics from any node left, exact: each device counted once.
    for (const node of survivors) {
      const answer = await until(async () => {
        const a = await stats(node, publishId);
        expect(a.status).toBe(200);
        return a.body['state'] === 'finished' && a;
      }, `publish ${publishId} finished on a node left`, 60_000);
      expect(answer.body).toMatchObject({ recipients: DEVICES, gateways: { fcm: { recipients: DEVICES, sent: DEVICES, failed: 0 } } });
    }
    const resends = (await Promise.all(survivors.map((n) => metric(n, 'herald_push_publish_resends_total')))).reduce((a, b) => a + b, 0);
    console.log(`sends per node before the kill: ${sent.join(', ')}; repeats at the gateway ${repeats}, counted as possible resends ${resends}`);
    expect(repeats).toBeLessThanOrEqual(resends);
  }, 420_000);
});
