/**
 * What counting costs the hot paths (src/metrics/): one HTTP answer recorded (counter map and
 * histogram child), one per-app counter bump, beside an empty call and performance.now()
 * alone, the floor they are measured against.
 */
import { Registry } from 'prom-client';
import { recordHttpRequest, registerHttpMetrics } from '../../src/metrics/http-metrics.js';
import { appCounters } from '../../src/metrics/node-counters.js';
import type { MicroSuite } from '../micro-suite.js';

export const suite: MicroSuite = {
  source: 'src/metrics/http-metrics.ts',
  setup(bench) {
    registerHttpMetrics(new Registry());
    let sink = 0;
    bench
      .add('recordHttpRequest (200, channels)', () => {
        recordHttpRequest('channels', 200, performance.now());
      })
      .add('appCounters(appId).eventsTriggered += 1', () => {
        appCounters('app-id').eventsTriggered += 1;
      })
      .add('reference: performance.now()', () => {
        sink += performance.now();
      })
      .add('reference: empty call', () => {
        sink++;
      });
    return {
      teardown: () => {
        if (sink < 0) throw new Error('unreachable');
      },
    };
  },
};
