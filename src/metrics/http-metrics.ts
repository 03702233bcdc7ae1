/**
 * HTTP request counts and durations per API (the `api` label: channels, devices, …; main
 * thread). The API comes from the route pattern, so routes need no extra option. Both are plain numbers on the hot path, turned into
 * Prometheus series when scraped.
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
  private readonly series = new Map<HttpApi, DurationSeries>();

  observe(api: HttpApi, seconds: number): void {
    let s = this.series.get(api);
    if (s === undefined) {
      s = { buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0, count: 0 };
      this.series.set(api, s);
    }
    let i = 0;
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
    s.buckets[i]!++;
    s.sum += seconds;
    s.count++;
  }

  /** The registry's view (prom-client's MetricObjectWithValues for a histogram). */
  get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: { labels: Record<string, string | number>; value: number; metricName: string }[] }> {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const [api, s] of this.series) {
      let cumulative = 0;
      DURATION_BUCKETS.forEach((le, i) => {
        cumulative += s.buckets[i]!;
        values.push({ labels: { le, api }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', api }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { api }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { api }, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  reset(): void {
    this.series.clear();
  }
}

let histogram: DurationHistogram | undefined;

/** Records one answered request; `startMs` is its performance.now() at arrival. */
export function recordHttpRequest(api: HttpApi, status: number, startMs: number): void {
  let byStatus = answered.get(api);
  if (byStatus === undefined) {
    byStatus = new Map();
    answered.set(api, byStatus);
  }
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  histogram?.observe(api, (performance.now() - startMs) / 1000);
}

/** Registers herald_http_requests_total and herald_http_request_duration_seconds. */
export function registerHttpMetrics(registry: Registry): void {
  new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests answered, by API and status',
    labelNames: ['api', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [api, byStatus] of answered) {
        for (const [status, n] of byStatus) this.inc({ api, status: String(status) }, n);
      }
    },
  });
  histogram = new DurationHistogram();
  registry.registerMetric(histogram as unknown as Parameters<Registry['registerMetric']>[0]);
}
