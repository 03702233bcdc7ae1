/** How other areas inside a shard hand events to the webhook outbox. */
export interface ChannelWebhookEvent {
  appId: string;
  /** Event object as it goes in the webhook body, e.g. {name: 'channel_occupied', channel}. */
  event: { name: string; channel: string; [field: string]: unknown };
}

export interface PushWebhookEvent {
  instanceId: string;
  /** Either an instance webhook kind (v1.*) or a per-publish webhookUrl delivery. */
  kind: string;
  payload: Record<string, unknown>;
  /** For per-publish webhooks (webhookUrl); instance webhooks use the instance's list. */
  url?: string;
}

export interface WebhookEmitter {
  /** Records a channel event durably in this shard's outbox (batched, retried). */
  channelEvent(e: ChannelWebhookEvent): void;
  /** Records a push webhook durably in this shard's outbox. */
  pushEvent(e: PushWebhookEvent): void;
}
