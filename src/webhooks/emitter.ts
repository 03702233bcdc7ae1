/**
 * How other areas inside a shard worker hand events to the webhook outbox. Both methods are
 * synchronous fire-and-forget: callers never await anything and never see delivery errors.
 *
 * Two implementations pass one contract test suite (test/unit/webhooks/webhook-emitter-contract.ts):
 * - the local one (outbox.ts, one node): the shard's LMDB outbox;
 * - the cluster one (shared-outbox.ts): a Redis stream every node's shards share and deliver from.
 * Each method below states its guarantee for both. On both, an event is delivered at least once
 * to each receiver that wants it, with one id (the same at every receiver and on every retry),
 * in the order of the calls per receiver, batched, retried with backoff and dead-lettered after
 * `maxAttempts` (docs/webhooks.md "Delivery guarantees" and "In a cluster").
 */

/** A channel event exactly as it goes into the webhook body (`events[]`), before Herald adds its `id`. */
export type ChannelEventBody =
  | { name: 'channel_occupied'; channel: string }
  | { name: 'channel_vacated'; channel: string }
  | { name: 'member_added'; channel: string; user_id: string }
  | { name: 'member_removed'; channel: string; user_id: string }
  | { name: 'client_event'; channel: string; event: string; data: string; socket_id: string; user_id?: string }
  | { name: 'cache_miss'; channel: string }
  | { name: 'subscription_count'; channel: string; subscription_count: number };

/**
 * One raw channel event, emitted in the order it happened on the shard owning the channel.
 * Send vacated/member_removed as they happen: the outbox applies the leave debounce.
 */
export interface ChannelWebhookEvent {
  appId: string;
  event: ChannelEventBody;
}

/** The instance webhook kinds of the Beams webhook reference. */
export type PushInstanceWebhookKind =
  | 'v1.PublishToUsersAttempt'
  | 'v1.UserNotificationAcknowledgement'
  | 'v1.UserNotificationOpen';

/**
 * A push webhook. Without `url`: an instance webhook, wrapped as `{payload, metadata}`, signed
 * (HMAC-SHA1, `Webhook-Signature`) and sent to every `push[].webhooks[]` entry of the instance.
 * With `url`: a per-publish `webhookUrl` delivery; `payload` (`{publishId, status, results}`)
 * is sent as-is, unsigned, and `kind` is only a label for logs and the `Webhook-Event-Type`
 * header (e.g. `publish.STARTED`, `publish.FINISHED`).
 */
export type PushWebhookEvent =
  | { instanceId: string; kind: PushInstanceWebhookKind; payload: Record<string, unknown>; url?: undefined }
  | { instanceId: string; kind: string; payload: Record<string, unknown>; url: string };

/** How a channel event is recorded. */
export interface ChannelEventOptions {
  /** The leave debounce was applied already (cluster mode): sent without a hold. */
  debounced?: boolean;
  /**
   * The app was removed and this is one of its last events (a member removed, a channel
   * vacated with it): sent without a hold to the receivers the app had, signed with its
   * credentials, whatever app later takes its id (webhooks/targets.ts).
   */
  retired?: boolean;
}

export interface WebhookEmitter {
  /**
   * Records a channel event for each receiver of the app whose `events` list and channel-name
   * filter want it (an app without webhooks: nothing). Local: written to this shard's LMDB
   * outbox in the same tick, committed within a few ms; the write is issued inside the call,
   * so it commits no later than any LMDB write the caller issues afterwards in the same shard
   * (await your own later write to know both are on disk). channel_vacated and member_removed
   * are held for the leave debounce (a re-occupy or re-add within it cancels both) unless
   * `debounced` or `retired`. Cluster: appended to the shared Redis stream, where any node's
   * shard delivers it; nothing is held here (the channel adapter applied the leave debounce in
   * Redis before, so `debounced` changes nothing). While Redis is away the write waits in this
   * process's memory and is retried: lost if the node dies before Redis is back.
   */
  channelEvent(e: ChannelWebhookEvent, options?: ChannelEventOptions): void;
  /**
   * Records a push webhook: an instance webhook for each of the instance's receivers, signed
   * for each, the same bytes on every attempt; a per-publish `url` (http or https only, or it
   * is dropped with a warning) gets the payload as is, unsigned. One event per request. Local:
   * written to this shard's LMDB outbox as channelEvent. Cluster: appended to the shared Redis
   * stream as channelEvent (the same wait while Redis is away).
   */
  pushEvent(e: PushWebhookEvent): void;
}
