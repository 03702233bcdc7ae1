/**
 * How other areas inside a shard worker hand events to the webhook outbox. Both methods are
 * synchronous fire-and-forget: the event is queued for a durable LMDB write in the same tick
 * (committed within a few ms, see docs/webhooks.md "Delivery guarantees") and delivered in
 * the background with retries. Callers never await anything and never see delivery errors.
 * The outbox write is issued inside the call, so it commits no later than any LMDB write the
 * caller issues afterwards in the same shard: await your own later write to know both are on disk.
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
 * Send vacated/member_removed as they happen: the outbox applies the reload debounce.
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
  /** The reload debounce was applied already (cluster mode): sent without a hold. */
  debounced?: boolean;
  /**
   * The app was removed and this is one of its last events (a member removed, a channel
   * vacated with it): sent without a hold to the receivers the app had, signed with its
   * credentials, whatever app later takes its id (webhooks/targets.ts).
   */
  retired?: boolean;
}

export interface WebhookEmitter {
  /** Records a channel event durably in this shard's outbox (debounced, batched, retried). */
  channelEvent(e: ChannelWebhookEvent, options?: ChannelEventOptions): void;
  /** Records a push webhook durably in this shard's outbox (retried; one event per request). */
  pushEvent(e: PushWebhookEvent): void;
}
