/**
 * The shipped Grafana dashboard (deploy/grafana/herald-dashboard.json) and Prometheus alert
 * rules (deploy/prometheus/herald-alerts.yml) query only what Herald exports: every metric
 * name and every label they match on is in a live scrape of the built server, run as a
 * one-node cluster (a private redis-server) so the cluster series are there too. Also the
 * series a dashboard needs before any traffic: gauges at 0 for every configured app,
 * `herald_build_info`, the webhook and disk-full counters.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load as loadYaml } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus } from '../helpers/prometheus-text.js';
import { RedisServer } from '../helpers/redis-server.js';
import { filePostgresServer } from '../helpers/file-postgres.js';
import { pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { DeviceApi, call, fcmToken } from './device-api-helpers.js';
import { until } from '../helpers/wait.js';

const APPS = [
  { id: 'busy-app', key: 'busy-key', secret: 'busy-secret', maxHttpRequestsPerSecond: 1000 },
  { id: 'idle-app', key: 'idle-key', secret: 'idle-secret' },
];
const PUSH = { instanceId: '6f1e2d3c-4b5a-4c6d-8e7f-0a1b2c3d4e5f', secretKey: 'dash-secret', web: null };
/** Series Prometheus itself adds to every target, not exported by Herald. */
const PROMETHEUS_SERIES = new Set(['up']);
/** Labels Prometheus attaches to every scraped series. */
const TARGET_LABELS = new Set(['instance', 'job']);

let redis: RedisServer;
let herald: HeraldProcess;
// A cluster with a push instance keeps its devices in PostgreSQL (cluster.postgresUrl).
const postgres = filePostgresServer();
let client: PusherJsClient | undefined;

beforeAll(async () => {
  redis = await new RedisServer().start();
  herald = await startHerald({
    shards: 2,
    config: { apps: APPS, push: [PUSH], cluster: { redisUrl: redis.url, keyPrefix: 'dash:', nodeId: 'dash-node', postgresUrl: postgres().url() } },
  });
});
afterAll(async () => {
  client?.disconnect();
  await herald?.dispose();
  await redis?.stop();
});

async function scrape(): Promise<{ text: string; series: Map<string, number> }> {
  const res = await fetch(`${herald.baseUrl}/metrics`);
  const text = await res.text();
  return { text, series: parsePrometheus(text) };
}

/** Metric names and their label names, as the scrape has them. */
function labelsByMetric(series: Map<string, number>): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const key of series.keys()) {
    const brace = key.indexOf('{');
    const name = brace < 0 ? key : key.slice(0, brace);
    const labels = out.get(name) ?? new Set<string>();
    for (const m of (brace < 0 ? '' : key.slice(brace)).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) labels.add(m[1]!);
    out.set(name, labels);
  }
  return out;
}

/** Each metric selector of a PromQL expression: the metric name and the label names it matches on. */
function selectors(expr: string): { name: string; labels: string[] }[] {
  const out: { name: string; labels: string[] }[] = [];
  for (const m of expr.matchAll(/\b((?:herald|nodejs|process)_[a-zA-Z0-9_]+|up)\b(\s*\{([^}]*)\})?/g)) {
    const labels = [...(m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"/g)].map((l) => l[1]!);
    out.push({ name: m[1]!, labels });
  }
  return out;
}

/** Every PromQL expression of the dashboard (panel targets and template variable queries). */
function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, 'deploy/grafana/herald-dashboard.json'), 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { definition?: string }[] };
  };
  return [...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)), ...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : []))];
}

function alertExpressions(): { alert: string; expr: string }[] {
  const rules = loadYaml(readFileSync(join(REPO_ROOT, 'deploy/prometheus/herald-alerts.yml'), 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] };
  return rules.groups.flatMap((g) => g.rules);
}

describe('metrics a dashboard can rely on', () => {
  it('exports the gauges at 0 and herald_build_info before any traffic', async () => {
    const { series, text } = await scrape();
    for (const app of APPS) expect(series.get(`herald_connections{app_id="${app.id}"}`), text).toBe(0);
    expect(series.get(`herald_push_publishes_total{instance_id="${PUSH.instanceId}"}`)).toBe(0);
    for (const gateway of ['apns', 'fcm', 'web']) {
      expect(series.get(`herald_push_notifications_total{instance_id="${PUSH.instanceId}",gateway="${gateway}",result="sent",reason=""}`), text).toBe(0);
    }
    expect(series.get('herald_rate_limited_total{app_id="busy-app",limit="maxHttpRequestsPerSecond"}'), text).toBe(0);
    expect(series.get('herald_webhook_pending')).toBe(0);
    expect(series.get('herald_webhook_dead_letters_total')).toBe(0);
    expect(series.get('herald_webhook_events_delivered_total')).toBe(0);
    expect(series.get('herald_cluster_available')).toBe(1);
    await until(async () => (await scrape()).series.get('herald_cluster_nodes') === 1, 'herald_cluster_nodes at 1', 15_000);
    const version = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    const info = [...series.entries()].filter(([key]) => key.startsWith('herald_build_info{'));
    expect(info).toHaveLength(1);
    expect(info[0]![1]).toBe(1);
    expect(info[0]![0]).toContain(`version="${version}"`);
    expect(info[0]![0]).toContain(`node="${process.version}"`);
    expect(info[0]![0]).toMatch(/uws="[^"]+"/);
    for (let shard = 0; shard < 2; shard++) expect(series.get(`herald_storage_full{shard="${shard}",data_dir="${herald.dataDir}"}`), text).toBe(0);
  });

  it('keeps an app whose last connection left at 0 instead of dropping its series', async () => {
    client = pusherJsClient(herald.port, APPS[0]!.key);
    await until(async () => (await scrape()).series.get(`herald_connections{app_id="${APPS[0]!.id}"}`) === 1, 'one connection counted', 10_000);
    client.disconnect();
    client = undefined;
    await until(async () => (await scrape()).series.get(`herald_connections{app_id="${APPS[0]!.id}"}`) === 0, 'the connection gauge back at 0', 10_000);
  });

  it('has every metric and label the Grafana dashboard and the alert rules query', async () => {
    // Traffic that makes the remaining labelled series appear: HTTP requests, a push failure with its reason.
    const devices = new DeviceApi(herald.baseUrl, PUSH.instanceId);
    const id = await devices.registerOk('fcm', fcmToken('dashboard'));
    expect((await devices.addInterest('fcm', id, 'news')).status).toBe(200);
    const published = await call(herald.baseUrl, 'POST', `/publish_api/v1/instances/${PUSH.instanceId}/publishes/interests`, {
      headers: { authorization: `Bearer ${PUSH.secretKey}` },
      body: { interests: ['news'], fcm: { notification: { title: 'hi' } } },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    const scraped = await until(async () => {
        const s = await scrape();
        return [...s.series.keys()].some((k) => k.startsWith('herald_push_notifications_total{') && k.includes('result="failed"')) && s;
      }, 'a failed push notification counted', 15_000);
    const exported = labelsByMetric(scraped.series);

    const queries = [...dashboardExpressions().map((expr) => ({ where: 'dashboard', expr })), ...alertExpressions().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }))];
    expect(queries.length).toBeGreaterThan(20);
    const missing: string[] = [];
    for (const { where, expr } of queries) {
      const found = selectors(expr);
      if (found.length === 0) missing.push(`${where}: no metric in ${expr}`);
      for (const { name, labels } of found) {
        if (PROMETHEUS_SERIES.has(name)) continue;
        const have = exported.get(name);
        if (!have) {
          missing.push(`${where}: ${name} is not exported`);
          continue;
        }
        for (const label of labels) if (!TARGET_LABELS.has(label) && !have.has(label)) missing.push(`${where}: ${name} has no label ${label}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('gives every herald_ series a help text and a type, and counters the _total suffix', async () => {
    const { text } = await scrape();
    const help = new Map([...text.matchAll(/^# HELP (herald_\w+) (.*)$/gm)].map((m) => [m[1]!, m[2]!]));
    const types = new Map([...text.matchAll(/^# TYPE (herald_\w+) (\w+)$/gm)].map((m) => [m[1]!, m[2]!]));
    expect(types.size).toBeGreaterThan(15);
    for (const [name, type] of types) {
      expect(help.get(name)?.length ?? 0, `${name} help`).toBeGreaterThan(10);
      if (type === 'counter') expect(name, 'counter name').toMatch(/_total$/);
      else expect(name, `${type} name`).not.toMatch(/_total$/);
    }
  });
});
