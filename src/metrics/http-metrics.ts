/**
 * HTTP request counts and durations per API area (main thread). The area comes from the route
 * pattern, so routes need no extra option; the histogram child per area is looked up once.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

export const HTTP_APIS = ['channels', 'devices', 'publish', 'reporting', 'admin', 'system'] as const;
export type HttpApi = (typeof HTTP_APIS)[number];

/** The API area of a route pattern, for the `api` label. */
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
let histogram: Histogram<'api'> | undefined;
const durationChildren = new Map<HttpApi, { observe(value: number): void }>();

/** Records one answered request; `startMs` is its performance.now() at arrival. */
export function recordHttpRequest(api: HttpApi, status: number, startMs: number): void {
  let byStatus = answered.get(api);
  if (byStatus === undefined) {
    byStatus = new Map();
    answered.set(api, byStatus);
  }
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  if (histogram === undefined) return;
  let child = durationChildren.get(api);
  if (child === undefined) {
    child = histogram.labels(api);
    durationChildren.set(api, child);
  }
  child.observe((performance.now() - startMs) / 1000);
}

/** Registers herald_http_requests_total and herald_http_request_duration_seconds. */
export function registerHttpMetrics(registry: Registry): void {
  new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests answered, by API area and status',
    labelNames: ['api', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [api, byStatus] of answered) {
        for (const [status, n] of byStatus) this.inc({ api, status: String(status) }, n);
      }
    },
  });
  histogram = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'Time from a request arriving to its answer, by API area',
    labelNames: ['api'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  durationChildren.clear();
}
