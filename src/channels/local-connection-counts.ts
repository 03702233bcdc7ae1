/**
 * ConnectionCounts in this thread's memory: the counterpart of the shared version
 * (front-end/shared-counters.ts) for one thread, with the same answers.
 */
import type { ConnectAnswer, ConnectionCounts } from './connection-counts.js';

export class LocalConnectionCounts implements ConnectionCounts {
  private readonly apps = new Map<string, number>();
  private total = 0;

  tryConnect(appId: string, appMax: number | null, nodeMax: number | null): ConnectAnswer {
    if (nodeMax !== null && this.total >= nodeMax) return 'node';
    const app = this.apps.get(appId) ?? 0;
    if (appMax !== null && app >= appMax) return 'app';
    this.total++;
    this.apps.set(appId, app + 1);
    return 'ok';
  }

  disconnected(appId: string): void {
    const app = this.apps.get(appId);
    if (app === undefined) return;
    this.total--;
    if (app > 1) this.apps.set(appId, app - 1);
    else this.apps.delete(appId);
  }

  connectionCount(appId?: string): number {
    return appId === undefined ? this.total : (this.apps.get(appId) ?? 0);
  }

  connectionCounts(): Map<string, number> {
    return new Map(this.apps);
  }
}
