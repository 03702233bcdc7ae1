/**
 * The benchmark's side of Herald's publish API: P1 publishes (`POST .../publishes/interests`)
 * and the statistics endpoint (`GET .../publishes/<id>`), with plain fetch and the instance's
 * secret key, as a customer's server would call them.
 */
import { BENCH_INSTANCE, publishBody } from './dataset.js';

/** A publish Herald accepted. */
export interface AcceptedPublish {
  publishId: string;
  /** When the request was sent and when the 200 arrived: epoch ms with sub-ms precision. */
  sentAtMs: number;
  acceptedAtMs: number;
}

/** The parts of the statistics answer the bench reads. */
export interface PublishStats {
  state: 'queued' | 'sending' | 'finished';
  recipients: number;
  acceptedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  gateways: Record<'apns' | 'fcm' | 'web', { recipients: number; sent: number; failed: number; removed: number }>;
}

/** Epoch ms with sub-ms precision, comparable across processes of one machine. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

const PUBLISHES = `/publish_api/v1/instances/${BENCH_INSTANCE.instanceId}/publishes`;
const auth = { authorization: `Bearer ${BENCH_INSTANCE.secretKey}` };

/** Publishes to `interests`; throws unless Herald answers 200 with a publish id. */
export async function publish(baseUrl: string, interests: readonly string[]): Promise<AcceptedPublish> {
  const sentAtMs = epochMs();
  const response = await fetch(`${baseUrl}${PUBLISHES}/interests`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(publishBody(interests)),
  });
  const acceptedAtMs = epochMs();
  const text = await response.text();
  if (response.status !== 200) throw new Error(`publish answered ${response.status}: ${text}`);
  const { publishId } = JSON.parse(text) as { publishId: string };
  return { publishId, sentAtMs, acceptedAtMs };
}

/** The publish's statistics. */
export async function publishStats(baseUrl: string, publishId: string): Promise<PublishStats> {
  const response = await fetch(`${baseUrl}${PUBLISHES}/${publishId}`, { headers: auth });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`publish statistics answered ${response.status}: ${text}`);
  return JSON.parse(text) as PublishStats;
}

/** Polls the statistics until every shard has finished; throws after `timeoutMs`. */
export async function waitFinished(baseUrl: string, publishId: string, timeoutMs: number): Promise<PublishStats> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const stats = await publishStats(baseUrl, publishId);
    if (stats.state === 'finished') return stats;
    if (performance.now() > deadline) throw new Error(`publish ${publishId} not finished within ${timeoutMs / 1000} s (state ${stats.state}, ${stats.recipients} recipients so far)`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Checks a device is visible through the device API (D3/D4); throws otherwise. */
export async function requireDevice(baseUrl: string, platform: string, deviceId: string): Promise<void> {
  const response = await fetch(`${baseUrl}/device_api/v1/instances/${BENCH_INSTANCE.instanceId}/devices/${platform}/${deviceId}`);
  if (response.status !== 200) throw new Error(`device ${platform}/${deviceId} answered ${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
}
