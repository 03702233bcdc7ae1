/**
 * herald_http_request_duration_seconds is counted by hand on the hot path: scraped, it must read
 * exactly as prom-client's own Histogram with the same buckets and observations would.
 */
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DURATION_BUCKETS, recordHttpRequest, registerHttpMetrics } from '../../../src/metrics/http-metrics.js';

/** The lines of one metric family in an exposition, sorted (series order is not part of the format). */
function family(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}_`) || l.startsWith(`# HELP ${name} `) || l.startsWith(`# TYPE ${name} `)).sort();
}

describe('herald_http_request_duration_seconds', () => {
  it('scrapes as a prom-client Histogram fed the same observations', async () => {
    const ours = new Registry();
    registerHttpMetrics(ours);
    const reference = new Registry();
    const histogram = new Histogram({
      name: 'herald_http_request_duration_seconds',
      help: 'Time from a request arriving to its answer, by API',
      labelNames: ['api'],
      buckets: [...DURATION_BUCKETS],
      registers: [reference],
    });
    // Durations well inside their buckets (the start is taken from performance.now()), and one above every bound.
    const observations: Array<['channels' | 'devices', number]> = [['channels', 0.0002], ['channels', 0.003], ['channels', 0.7], ['devices', 0.04], ['channels', 30]];
    for (const [api, seconds] of observations) {
      recordHttpRequest(api, 200, performance.now() - seconds * 1000);
      histogram.observe({ api }, seconds);
    }
    const mine = family(await ours.metrics(), 'herald_http_request_duration_seconds');
    const theirs = family(await reference.metrics(), 'herald_http_request_duration_seconds');
    const withoutSum = (lines: string[]) => lines.filter((l) => !l.includes('_sum{'));
    expect(withoutSum(mine)).toEqual(withoutSum(theirs));
    expect(mine.filter((l) => l.includes('_bucket{'))).toHaveLength(2 * (DURATION_BUCKETS.length + 1));
    // Sums agree to the clock's precision.
    const sum = (lines: string[], api: string) => Number(lines.find((l) => l.startsWith(`herald_http_request_duration_seconds_sum{api="${api}"}`))!.split(' ')[1]);
    expect(sum(mine, 'channels')).toBeCloseTo(sum(theirs, 'channels'), 2);
    expect(sum(mine, 'devices')).toBeCloseTo(sum(theirs, 'devices'), 2);
  });
});
