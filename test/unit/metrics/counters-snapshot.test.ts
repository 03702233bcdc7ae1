/**
 * A thread's counters as a snapshot (src/metrics/counters-snapshot.ts): taken in a real worker
 * thread (the built dist/ modules: each thread has its own module-level counters) and gathered
 * over a port (src/front-end/counter-snapshots.ts), summed with this thread's, and scraped
 * through the registered collectors: each series reads one figure, the sum; apps no longer
 * configured are left out, and so is a thread that does not answer.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { counterGatherer } from '../../../src/front-end/counter-snapshots.js';
import { snapshotNodeCounters, type NodeCountersSnapshot } from '../../../src/metrics/counters-snapshot.js';
import { recordHttpRequest, registerHttpMetrics } from '../../../src/metrics/http-metrics.js';
import { appCounters, countDisconnect, countPushPublish, countRateLimited } from '../../../src/metrics/node-counters.js';
import { processCounters, registerNodeMetrics, type NodeMetricsSources } from '../../../src/metrics/node-metrics.js';
import { parsePrometheus } from '../../helpers/prometheus-text.js';
import { REPO_ROOT } from '../../helpers/herald-process.js';
import { nextEvent } from '../../helpers/wait.js';

/** Counts on a thread of its own, then answers main's asks for its counters on the port it was given. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const counters = await import(new URL('metrics/node-counters.js', workerData.dist).href);
  const http = await import(new URL('metrics/http-metrics.js', workerData.dist).href);
  const { answerCounterSnapshots } = await import(new URL('front-end/counter-snapshots.js', workerData.dist).href);
  counters.appCounters('app-a').eventsTriggered += 5;
  counters.appCounters('app-a').wsMessagesSent += 7;
  counters.countDisconnect('app-a', 4009);
  counters.countRateLimited('app-a', 'maxEventsPerSecond');
  counters.countDisconnect('gone-app', 1000);
  counters.countPushPublish('instance-1');
  http.recordHttpRequest('channels', 200, performance.now() - 3);
  http.recordHttpRequest('admin', 401, performance.now());
  const stop = answerCounterSnapshots(workerData.port);
  parentPort.postMessage('counted');
  parentPort.once('message', () => {
    stop();
    workerData.port.close();
  });
})();
`;

/** A worker thread that has counted, and main's end of its port. */
async function countingThread(): Promise<{ thread: Worker; port: MessagePort }> {
  const { port1, port2 } = new MessageChannel();
  const thread = new Worker(THREAD_SOURCE, { eval: true, workerData: { dist: pathToFileURL(join(REPO_ROOT, 'dist/src/')).href, port: port2 }, transferList: [port2] });
  await nextEvent(thread, 'message', 'the thread counting', 30_000);
  return { thread, port: port1 };
}

const sources: NodeMetricsSources = {
  connections: () => new Map([['app-a', 3]]),
  configured: () => ({ apps: [{ id: 'app-a', maxHttpRequestsPerSecond: null, maxEventsPerSecond: 10, maxNewConnectionsPerSecond: null, maxNewConnectionsPerSecondPerIp: null }], instanceIds: ['instance-1'] }),
  build: { version: 'test', uws: 'test' },
};

describe('counters across threads', () => {
  it('sums a worker thread\'s snapshot with this thread\'s: one figure per series', async () => {
    const { thread, port } = await countingThread();
    // A second thread that never answers: left out after the timeout.
    const silent = new MessageChannel();
    const started = Date.now();
    const gather = counterGatherer(() => [port, silent.port1], 300);
    const gathered = await gather();
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(gathered).toHaveLength(1);
    appCounters('app-a').eventsTriggered += 2;
    appCounters('app-a').wsMessagesSent += 1;
    countDisconnect('app-a', 4009);
    countDisconnect('app-a', 1000);
    countRateLimited('app-a', 'maxEventsPerSecond');
    countPushPublish('instance-1');
    countPushPublish('instance-1');
    recordHttpRequest('channels', 200, performance.now());

    // Wired as HeraldMetrics wires its `gather` option: gathered once per scrape.
    const registry = new Registry();
    const scrape = processCounters(sources, gather);
    const counters = (): Promise<NodeCountersSnapshot> => scrape;
    registerHttpMetrics(registry, async () => (await counters()).http);
    registerNodeMetrics(registry, sources, counters);
    const m = parsePrometheus(await registry.metrics());
    thread.postMessage('stop');
    await nextEvent(thread, 'exit', 'the thread exiting', 10_000);
    port.close();
    silent.port1.close();

    expect(m.get('herald_events_triggered_total{app_id="app-a"}')).toBe(7);
    expect(m.get('herald_ws_messages_sent_total{app_id="app-a"}')).toBe(8);
    expect(m.get('herald_ws_disconnects_total{app_id="app-a",code="4009"}')).toBe(2);
    expect(m.get('herald_ws_disconnects_total{app_id="app-a",code="1000"}')).toBe(1);
    expect(m.get('herald_rate_limited_total{app_id="app-a",limit="maxEventsPerSecond"}')).toBe(2);
    expect(m.get('herald_push_publishes_total{instance_id="instance-1"}')).toBe(3);
    expect(m.get('herald_http_requests_total{api="channels",status="200"}')).toBe(2);
    expect(m.get('herald_http_requests_total{api="admin",status="401"}')).toBe(1);
    expect(m.get('herald_http_request_duration_seconds_count{api="channels"}')).toBe(2);
    expect(m.get('herald_http_request_duration_seconds_bucket{le="+Inf",api="channels"}')).toBe(2);
    // The thread's 3 ms request is above the 2.5 ms bound, this thread's (about 0) below it.
    expect(m.get('herald_http_request_duration_seconds_bucket{le="0.0025",api="channels"}')).toBe(1);
    // An app the config no longer has is left out, whichever thread counted it.
    expect([...m.keys()].some((k) => k.includes('gone-app'))).toBe(false);
    // One front-end thread by default, holding every connection.
    expect(m.get('herald_front_end_threads')).toBe(1);
    expect(m.get('herald_front_end_connections{thread="0"}')).toBe(3);
  });

  it('reports each front-end thread\'s connections when told them', async () => {
    const registry = new Registry();
    registerNodeMetrics(registry, { ...sources, threadConnections: () => [4, 0, 2] });
    const m = parsePrometheus(await registry.metrics());
    expect(m.get('herald_front_end_threads')).toBe(3);
    expect(m.get('herald_front_end_connections{thread="0"}')).toBe(4);
    expect(m.get('herald_front_end_connections{thread="1"}')).toBe(0);
    expect(m.get('herald_front_end_connections{thread="2"}')).toBe(2);
  });

  it('is a copy: later counts do not change a snapshot taken before them', () => {
    const before = snapshotNodeCounters();
    const events = before.apps.find((a) => a.appId === 'app-a')?.eventsTriggered ?? 0;
    appCounters('app-a').eventsTriggered++;
    expect(before.apps.find((a) => a.appId === 'app-a')?.eventsTriggered ?? 0).toBe(events);
  });
});
