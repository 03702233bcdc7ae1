/**
 * HTTP request counts and durations per API (the `api` label: channels, devices, …), counted by
 * the thread that answered. The API comes from the route pattern, so routes need no extra
 * option. Both are plain numbers on the hot path, turned into Prometheus series when scraped
 * (a front-end thread's as a snapshot summed on main: counters-snapshot.ts).
 */
import { Counter, type Registry } from 'prom-client';

export const HTTP_APIS = ['channels', 'devices', 'publish', 'reporting', 'admin', 'system'] as const;
export type HttpApi = (typeof HTTP_APIS)[number];

/** The API a route pattern belongs to, for the `api` label. */
export function apiOfPattern(pattern: string): HttpApi {
  if (pattern.startsWith('/apps/')) return 'channels';
  if (pattern.startsWith('/device_api/')) return 'devices';
  if (pattern.startsWith('/publish_api/')) return 'publish';
  if (pattern.startsWith('/reporting_api/')) return 'reporting';
  if (pattern.startsWith('/admin')) return 'admin';
  return 'system';
}

/** api → status → answers. Plain numbers on the hot path; turned into the counter at scrape. */
const answered = new Map<HttpApi, Map<number, number>>();

/** Upper bounds (seconds) of herald_http_request_duration_seconds. */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

interface DurationSeries {
  /** Observations per bucket (not cumulative); the last slot is above the largest bound. */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/** api → its request durations. Plain numbers on the hot path; turned into the histogram at scrape. */
const durations = new Map<HttpApi, DurationSeries>();

/** One API's durations as plain data: observations per bucket (not cumulative, the last above every bound), their sum (s) and count. */
export interface DurationSnapshot {
  readonly api: HttpApi;
  readonly buckets: readonly number[];
  readonly sum: number;
  readonly count: number;
}

/** This thread's HTTP counters as plain data (a front-end thread posts it to main at scrape time). */
export interface HttpCountersSnapshot {
  /** [api, status, answers]. */
  readonly answered: readonly (readonly [HttpApi, number, number])[];
  readonly durations: readonly DurationSnapshot[];
}

export function snapshotHttpCounters(): HttpCountersSnapshot {
  const answeredList: [HttpApi, number, number][] = [];
  for (const [api, byStatus] of answered) for (const [status, n] of byStatus) answeredList.push([api, status, n]);
  return { answered: answeredList, durations: [...durations].map(([api, s]) => ({ api, buckets: [...s.buckets], sum: s.sum, count: s.count })) };
}

/** Several threads' HTTP counters as one: each series summed. */
export function sumHttpCounters(snapshots: readonly HttpCountersSnapshot[]): HttpCountersSnapshot {
  const byKey = new Map<string, [HttpApi, number, number]>();
  const byApi = new Map<HttpApi, { buckets: number[]; sum: number; count: number }>();
  for (const snapshot of snapshots) {
    for (const [api, status, n] of snapshot.answered) {
      const key = `${api} ${status}`;
      const entry = byKey.get(key);
      if (entry) entry[2] += n;
      else byKey.set(key, [api, status, n]);
    }
    for (const d of snapshot.durations) {
      const entry = byApi.get(d.api);
      if (entry === undefined) {
        byApi.set(d.api, { buckets: [...d.buckets], sum: d.sum, count: d.count });
      } else {
        d.buckets.forEach((n, i) => (entry.buckets[i] = (entry.buckets[i] ?? 0) + n));
        entry.sum += d.sum;
        entry.count += d.count;
      }
    }
  }
  return { answered: [...byKey.values()], durations: [...byApi].map(([api, d]) => ({ api, ...d })) };
}

/**
 * herald_http_request_duration_seconds, by `api`: counted in plain numbers on the hot path (a
 * prom-client Histogram builds and hashes a label object per observation, ~4 % of a trigger's
 * CPU) and handed to the registry in prom-client's histogram shape when scraped.
 */
class DurationHistogram {
  readonly name = 'herald_http_request_duration_seconds';
  readonly help = 'Time from a request arriving to its answer, by API';
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(private readonly counters: () => HttpCountersSnapshot | Promise<HttpCountersSnapshot>) {}

  /** The registry's view (prom-client's MetricObjectWithValues for a histogram). */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: { labels: Record<string, string | number>; value: number; metricName: string }[] }> {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const s of (await this.counters()).durations) {
      const api = s.api;
      let cumulative = 0;
      DURATION_BUCKETS.forEach((le, i) => {
        cumulative += s.buckets[i] ?? 0;
        values.push({ labels: { le, api }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', api }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { api }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { api }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    // The figures are the process's counters, read at each scrape: nothing held here.
  }
}

/** Records one answered request; `startMs` is its performance.now() at arrival. */
export function recordHttpRequest(api: HttpApi, status: number, startMs: number): void {
  let byStatus = answered.get(api);
  if (byStatus === undefined) {
    byStatus = new Map();
    answered.set(api, byStatus);
  }
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  const seconds = (performance.now() - startMs) / 1000;
  let s = durations.get(api);
  if (s === undefined) {
    s = { buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0, count: 0 };
    durations.set(api, s);
  }
  let i = 0;
  while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
  s.buckets[i]!++;
  s.sum += seconds;
  s.count++;
}

/**
 * Registers herald_http_requests_total and herald_http_request_duration_seconds, read from
 * `counters` at each scrape (default: this thread's own).
 */
export function registerHttpMetrics(registry: Registry, counters: () => HttpCountersSnapshot | Promise<HttpCountersSnapshot> = snapshotHttpCounters): void {
  new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests answered, by API and status',
    labelNames: ['api', 'status'],
    registers: [registry],
    async collect() {
      const { answered: list } = await counters();
      this.reset();
      for (const [api, status, n] of list) this.inc({ api, status: String(status) }, n);
    },
  });
  registry.registerMetric(new DurationHistogram(counters) as unknown as Parameters<Registry['registerMetric']>[0]);
}
