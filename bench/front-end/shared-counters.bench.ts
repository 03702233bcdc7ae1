/**
 * The process-wide counters over SharedArrayBuffers (src/front-end/shared-counters.ts) beside
 * the in-memory ones they stand in for on several front-end threads, one thread uncontended:
 * a rate-limit take (per app, per IP), a message-quota charge, and a connection admitted then
 * closed.
 */
import { LocalConnectionCounts } from '../../src/channels/local-connection-counts.js';
import { MessageQuota } from '../../src/channels/quota.js';
import { LocalRateCounter } from '../../src/channels/rate-limits/local-rate-counter.js';
import { SharedCounters } from '../../src/front-end/shared-counters.js';
import type { MicroSuite } from '../micro-suite.js';

const LIMIT = 1e9;
const app = { id: 'app-1', messageQuota: LIMIT };

export const suite: MicroSuite = {
  source: 'src/front-end/shared-counters.ts',
  setup(bench) {
    const main = SharedCounters.create({ threads: 2, maxApps: 1_024 });
    const shared = SharedCounters.attach(main.init, 0);
    shared.setSlot(app.id, main.assignSlot(app.id));
    const localRate = new LocalRateCounter();
    const localQuota = new MessageQuota();
    const localCounts = new LocalConnectionCounts();
    let sink = 0;
    bench.add('take per app: in memory', () => {
      sink ^= localRate.take('e:app-1', 1, LIMIT);
    });
    bench.add('take per app: shared', () => {
      sink ^= shared.rateCounter.take('e:app-1', 1, LIMIT);
    });
    bench.add('take per IP: in memory', () => {
      sink ^= localRate.take('i:app-1\u0000203.0.113.7', 1, LIMIT);
    });
    bench.add('take per IP: shared', () => {
      sink ^= shared.rateCounter.take('i:app-1\u0000203.0.113.7', 1, LIMIT);
    });
    bench.add('quota charge: in memory', () => localQuota.charge(app, 1));
    bench.add('quota charge: shared', () => shared.quota.charge(app, 1));
    bench.add('connect + disconnect: in memory', () => {
      sink ^= localCounts.tryConnect(app.id, LIMIT, LIMIT).length;
      localCounts.disconnected(app.id);
    });
    bench.add('connect + disconnect: shared', () => {
      sink ^= shared.tryConnect(app.id, LIMIT, LIMIT).length;
      shared.disconnected(app.id);
    });
    return { teardown: () => void sink };
  },
};
