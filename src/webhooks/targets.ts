/**
 * Which receivers an event goes to, and the credentials a request to one of them is signed
 * with, from the frozen config. Secrets stay here: they are never written to the outbox.
 *
 * An app removed (deleted through the admin API, or gone from the config on a reload) is kept
 * here, retired, for as long as its last webhooks may take to be delivered (retiredKeepMs):
 * the member_removed and channel_vacated its removal produces are sent to the receivers it had,
 * signed with its key and secret. They travel as `retired` targets, which only the retired
 * app answers for: an app created again with the same id signs nothing of the old one.
 */
import type { AppConfig, ChannelWebhookConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';
import type { WebhookTarget } from './outbox-store.js';
import type { TenantChange } from '../shards/context.js';
import { MAX_RETRY_DELAY_MS } from './http-sender.js';

/** Added to a retired app's delivery schedule (ms): the time its webhooks may wait behind others of the same URL. */
const RETIRED_MARGIN_MS = 60_000;

/**
 * How long a removed app's receivers are kept (ms): the longest its last webhooks can take, from
 * the leave debounce and batch window through every attempt (each up to `timeoutMs`) and the
 * retry delays between them, plus a margin. Defaults: about 4 minutes.
 */
export function retiredKeepMs(delivery: Readonly<HeraldConfig['webhookDelivery']>): number {
  let retries = 0;
  for (let attempt = 1; attempt < delivery.maxAttempts; attempt++) retries += Math.min(MAX_RETRY_DELAY_MS, delivery.retryBaseMs * 2 ** (attempt - 1));
  return delivery.pageReloadDebounceMs + delivery.batchWindowMs + delivery.maxAttempts * delivery.timeoutMs + retries + RETIRED_MARGIN_MS;
}

/** Signing material for one target, or why there is none. */
export type TargetCredentials =
  | { kind: 'channel'; appKey: string; appSecret: string }
  | { kind: 'push'; secret: string }
  | { kind: 'publish' }
  | { kind: 'gone'; reason: string };

interface RetiredApp {
  app: AppConfig;
  /** ms since the epoch after which it is forgotten. */
  untilMs: number;
}

export class WebhookTargets {
  private readonly apps: Map<string, AppConfig>;
  private readonly instances: Map<string, PushInstanceConfig>;
  /** Removed apps with webhooks, by id, oldest removal first (see the file header). */
  private readonly retired = new Map<string, RetiredApp>();

  /** `keepRetiredMs`: how long a removed app's receivers stay (retiredKeepMs). */
  constructor(
    config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>,
    private readonly keepRetiredMs = 0,
    private readonly now: () => number = Date.now,
  ) {
    this.apps = new Map(config.apps.map((a) => [a.id, a]));
    this.instances = new Map(config.push.map((p) => [p.instanceId, p]));
  }

  /** Takes a few apps or push instances changed at run time (admin API); the others stay as they are. */
  patch(change: TenantChange): void {
    for (const app of change.apps ?? []) this.apps.set(app.id, app);
    for (const appId of change.removedApps ?? []) this.retire(appId);
    for (const instance of change.push ?? []) this.instances.set(instance.instanceId, instance);
    for (const instanceId of change.removedPush ?? []) this.instances.delete(instanceId);
  }

  /** The targets of a reloaded config (SIGHUP): the apps it no longer has are retired, those retired before kept. */
  reloaded(config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>): WebhookTargets {
    const next = new WebhookTargets(config, this.keepRetiredMs, this.now);
    for (const [appId, retired] of this.retired) next.retired.set(appId, retired);
    for (const app of this.apps.values()) if (!next.apps.has(app.id)) next.retireApp(app);
    return next;
  }

  private retire(appId: string): void {
    const app = this.apps.get(appId);
    if (!app) return;
    this.apps.delete(appId);
    this.retireApp(app);
  }

  private retireApp(app: AppConfig): void {
    const now = this.now();
    for (const [appId, retired] of this.retired) {
      if (retired.untilMs > now) break;
      this.retired.delete(appId);
    }
    this.retired.delete(app.id);
    if (app.webhooks.length > 0 && this.keepRetiredMs > 0) this.retired.set(app.id, { app, untilMs: now + this.keepRetiredMs });
  }

  /**
   * The app whose receivers an event goes to: with `retired`, the app as it was removed (or,
   * until the removal reaches this list, as it still is here); else the running app.
   */
  private appFor(appId: string, retired: boolean): AppConfig | undefined {
    if (!retired) return this.apps.get(appId);
    const entry = this.retired.get(appId);
    if (entry && entry.untilMs > this.now()) return entry.app;
    return this.apps.get(appId);
  }

  /** True when the app (`retired`: the removed app) has any webhook receiver (the cheap check before any other work). */
  appHasWebhooks(appId: string, retired = false): boolean {
    return (this.appFor(appId, retired)?.webhooks.length ?? 0) > 0;
  }

  /**
   * The app's receivers that want this event: its name is in `events` and the channel matches
   * the prefix filter. `retired`: the last events of a removed app (see the file header).
   */
  channelTargets(appId: string, eventName: string, channel: string, retired = false): WebhookTarget[] {
    const app = this.appFor(appId, retired);
    if (!app) return [];
    const out: WebhookTarget[] = [];
    for (const hook of app.webhooks) {
      if (wants(hook, eventName, channel)) out.push(retired ? { kind: 'channel', appId, url: hook.url, retired: true } : { kind: 'channel', appId, url: hook.url });
    }
    return out;
  }

  /** Every instance webhook of a push instance. */
  pushTargets(instanceId: string): WebhookTarget[] {
    const instance = this.instances.get(instanceId);
    if (!instance) return [];
    return instance.webhooks.map((hook, index) => ({ kind: 'push', instanceId, url: hook.url, hook: index }));
  }

  /** What a request to the target is signed with; `gone` when the config no longer has the receiver. */
  credentials(target: WebhookTarget): TargetCredentials {
    switch (target.kind) {
      case 'channel': {
        const app = this.appFor(target.appId, target.retired === true) ?? (target.retired ? undefined : this.appFor(target.appId, true));
        if (!app) return { kind: 'gone', reason: 'app no longer configured' };
        if (!app.webhooks.some((h) => h.url === target.url)) return { kind: 'gone', reason: 'webhook URL no longer configured for the app' };
        return { kind: 'channel', appKey: app.key, appSecret: app.secret };
      }
      case 'push': {
        const instance = this.instances.get(target.instanceId);
        if (!instance) return { kind: 'gone', reason: 'push instance no longer configured' };
        const hook = instance.webhooks[target.hook]?.url === target.url ? instance.webhooks[target.hook] : instance.webhooks.find((h) => h.url === target.url);
        if (!hook) return { kind: 'gone', reason: 'webhook URL no longer configured for the instance' };
        return { kind: 'push', secret: hook.secret };
      }
      case 'publish':
        return { kind: 'publish' };
    }
  }
}

function wants(hook: ChannelWebhookConfig, eventName: string, channel: string): boolean {
  if (!(hook.events as readonly string[]).includes(eventName)) return false;
  const prefix = hook.filter?.channelNamePrefix;
  return prefix === undefined || channel.startsWith(prefix);
}

/** Only http(s) URLs are delivered to (a per-publish webhookUrl comes from API callers). */
export function isDeliverableUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}
