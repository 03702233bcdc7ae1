/**
 * The setup of a cluster test file about webhooks: its cluster bed (heraldClusterBed: a private
 * redis-server, clusters disposed of after each test), a pool of clients of the app, and one real
 * webhook receiver started before the first test and closed after the last.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { ClientPool } from './channel-clients.js';
import { distinctEvents, eventLabel, heraldClusterBed, type HeraldClusterBed } from './herald-cluster.js';
import type { HeraldProcess } from './herald-process.js';
import type { ChannelsCreds } from './sdk-clients.js';
import { flushedBy } from './wait.js';
import { WebhookReceiver } from './webhook-receiver.js';

export interface ClusterWebhookBed {
  readonly bed: HeraldClusterBed;
  /** Clients of the app, disconnected after each test. */
  readonly pool: ClientPool;
  /** The file's receiver (started before the first test). */
  readonly receiver: WebhookReceiver;
  /** Labels (eventLabel) of the delivered events, redeliveries once, on channels whose name contains `tag`. */
  labels(tag?: string): string[];
  /**
   * For "no more webhooks": each node decides one more after what is under test (a channel of
   * its own occupied, `marker-<name>-<i>`: no test's tag in `name`), and waits until they are
   * delivered: what the nodes decided before has been sent by then. The app's webhooks must
   * include channel_occupied.
   */
  markersDelivered(nodes: HeraldProcess[], name: string): Promise<void>;
}

/** Registers the file's hooks; `name` starts the clusters' key prefixes. */
export function clusterWebhookBed(name: string, app: ChannelsCreds): ClusterWebhookBed {
  const bed = heraldClusterBed(name);
  const pool = new ClientPool(app);
  let receiver: WebhookReceiver | undefined;
  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterEach(() => pool.disconnectAll());
  afterAll(async () => {
    await receiver?.close();
  });
  const started = (): WebhookReceiver => {
    if (!receiver) throw new Error('the webhook receiver starts before the first test');
    return receiver;
  };
  const labels = (tag = ''): string[] =>
    distinctEvents(started().deliveredEvents())
      .filter((e) => String(e.channel).includes(tag))
      .map(eventLabel);
  return {
    bed,
    pool,
    get receiver(): WebhookReceiver {
      return started();
    },
    labels,
    async markersDelivered(nodes, name) {
      const channels = nodes.map((_, i) => `marker-${name}-${i}`);
      await flushedBy(
        () => Promise.all(nodes.map(async (node, i) => (await pool.connect(node)).subscribe(channels[i]!))),
        () => channels.every((c) => labels(c).includes(`channel_occupied:${c}`)),
        `marker webhooks ${channels.join(', ')}`,
      );
    },
  };
}
