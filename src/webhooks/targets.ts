/**
 * Which receivers an event goes to, and the credentials a request to one of them is signed
 * with, from the frozen config. Secrets stay here: they are never written to the outbox.
 */
import type { AppConfig, ChannelWebhookConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';
import type { WebhookTarget } from './outbox-store.js';
import type { TenantChange } from '../shards/context.js';

/** Signing material for one target, or why there is none. */
export type TargetCredentials =
  | { kind: 'channel'; appKey: string; appSecret: string }
  | { kind: 'push'; secret: string }
  | { kind: 'publish' }
  | { kind: 'gone'; reason: string };

export class WebhookTargets {
  private readonly apps: Map<string, AppConfig>;
  private readonly instances: Map<string, PushInstanceConfig>;

  constructor(config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>) {
    this.apps = new Map(config.apps.map((a) => [a.id, a]));
    this.instances = new Map(config.push.map((p) => [p.instanceId, p]));
  }

  /** Takes a few apps or push instances changed at run time (admin API); the others stay as they are. */
  patch(change: TenantChange): void {
    for (const app of change.apps ?? []) this.apps.set(app.id, app);
    for (const appId of change.removedApps ?? []) this.apps.delete(appId);
    for (const instance of change.push ?? []) this.instances.set(instance.instanceId, instance);
    for (const instanceId of change.removedPush ?? []) this.instances.delete(instanceId);
  }

  /** True when the app has any webhook receiver (the cheap check before any other work). */
  appHasWebhooks(appId: string): boolean {
    return (this.apps.get(appId)?.webhooks.length ?? 0) > 0;
  }

  /** The app's receivers that want this event: its name is in `events` and the channel matches the prefix filter. */
  channelTargets(appId: string, eventName: string, channel: string): WebhookTarget[] {
    const app = this.apps.get(appId);
    if (!app) return [];
    const out: WebhookTarget[] = [];
    for (const hook of app.webhooks) {
      if (wants(hook, eventName, channel)) out.push({ kind: 'channel', appId, url: hook.url });
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
        const app = this.apps.get(target.appId);
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
