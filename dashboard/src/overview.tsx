/**
 * Overview: this node, its shards, front-end threads and webhooks, its cluster, live message
 * rate, and a page of the apps and of the push instances (OVERVIEW_PAGE a page, with their
 * totals): the poll's answer stays the same size however many apps there are.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { openStream, type ClusterOverview, type FrontEndFigures, type Overview, type Stats } from './api';
import { LiveChart, pushPoint, type Series } from './chart';
import { Link } from './router';
import { Secret, Stat, formatDuration, formatNumber, usePoll } from './util';

const EMPTY: Series = { times: [], values: [] };
/** Apps and push instances per overview page. */
const OVERVIEW_PAGE = 50;

/** The overview's path for the pages shown (null: the first). */
function overviewPath(appCursor: string | null, pushCursor: string | null): string {
  const params = new URLSearchParams({ limit: String(OVERVIEW_PAGE), pushLimit: String(OVERVIEW_PAGE) });
  if (appCursor) params.set('cursor', appCursor);
  if (pushCursor) params.set('pushCursor', pushCursor);
  return `/overview?${params.toString()}`;
}

export function OverviewPage() {
  const [appCursor, setAppCursor] = useState<string | null>(null);
  const [pushCursor, setPushCursor] = useState<string | null>(null);
  const { data, error } = usePoll<Overview>(overviewPath(appCursor, pushCursor), 3000);
  const [stats, setStats] = useState<Stats | null>(null);
  const [messages, setMessages] = useState<Series>(EMPTY);
  const [pushRate, setPushRate] = useState<Series>(EMPTY);
  const last = useRef<Stats | null>(null);
  const lastPush = useRef<{ t: number; n: number } | null>(null);

  useEffect(
    () =>
      openStream(null, {
        onEvent: (type, payload) => {
          if (type !== 'stats') return;
          const s = payload as Stats;
          const prev = last.current;
          if (prev) {
            const rate = Math.max(0, ((s.messages - prev.messages) * 1000) / Math.max(1, s.t - prev.t));
            setMessages((m) => pushPoint(m, s.t / 1000, rate));
          }
          last.current = s;
          setStats(s);
        },
      }),
    [],
  );

  useEffect(() => {
    if (!data) return;
    const now = Date.now();
    const n = data.push.notificationsThisMonth;
    const prev = lastPush.current;
    if (prev && now > prev.t) setPushRate((p) => pushPoint(p, now / 1000, Math.max(0, ((n - prev.n) * 1000) / (now - prev.t)), 60));
    lastPush.current = { t: now, n };
  }, [data]);

  const node = data?.node;
  const currentRate = messages.values.at(-1) ?? 0;
  return (
    <div class="stack">
      <h1>Overview</h1>
      {error && <p class="error">Could not load the overview: {error}</p>}
      <section class="stats" aria-label="This node">
        <Stat label="Uptime" value={node ? formatDuration(node.uptimeSeconds) : '–'} />
        <Stat label="Connections" value={formatNumber(stats?.connections ?? node?.connections)} />
        <Stat label="Messages / s" value={formatNumber(currentRate, 1)} />
        <Stat label="Occupied channels" value={formatNumber(node?.occupiedChannels)} />
        <Stat
          label="Webhook queue"
          value={data?.webhooks ? formatNumber(data.webhooks.pending + data.webhooks.inFlight) : '–'}
          hint={data?.webhooks ? `${formatNumber(data.webhooks.failedAttempts)} failed attempts, ${formatNumber(data.webhooks.deadLettered)} dead-lettered` : undefined}
        />
        <Stat label="Push notifications / s" value={formatNumber(pushRate.values.at(-1) ?? 0, 1)} hint={data ? `${formatNumber(data.push.notificationsThisMonth)} this month` : undefined} />
      </section>
      <div class="columns">
        <section class="card">
          <h2>Messages per second</h2>
          <LiveChart label="messages per second" series={messages} />
        </section>
        <section class="card">
          <h2>Push notifications per second</h2>
          <LiveChart label="push notifications per second" series={pushRate} />
        </section>
      </div>
      <div class="columns">
        <section class="card">
          <h2>Shards</h2>
          <table>
            <thead>
              <tr>
                <th>Shard</th>
                <th>State</th>
                <th>Queue depth</th>
                <th>Worker uptime</th>
              </tr>
            </thead>
            <tbody>
              {node?.shards.map((s) => (
                <tr key={s.shard}>
                  <td>{s.shard}</td>
                  <td>{s.up ? 'up' : <span class="bad">not answering</span>}</td>
                  <td>{formatNumber(s.queueDepth)}</td>
                  <td>{s.up ? formatDuration(Math.floor(s.uptimeMs / 1000)) : '–'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
        <FrontEndCard frontEnd={data?.frontEnd} />
      </div>
      {data?.cluster && <ClusterCard cluster={data.cluster} />}
      <section class="card">
        <h2>Apps{data && <span class="hint"> ({formatNumber(data.appsTotal)})</span>}</h2>
        <table class="apps">
          <thead>
            <tr>
              <th>App id</th>
              <th>Key</th>
              <th>Secret</th>
              <th>Connections</th>
              <th>Channels</th>
            </tr>
          </thead>
          <tbody>
            {data?.apps.map((a) => (
              <tr key={a.id}>
                <td>
                  <Link href={`/dashboard/apps/${encodeURIComponent(a.id)}`}>{a.id}</Link>
                  {!a.enabled && <span class="badge">disabled</span>}
                </td>
                <td>
                  <code>{a.key}</code>
                </td>
                <td>
                  <Secret masked={a.secret} path={`/apps/${encodeURIComponent(a.id)}/secret`} field="secret" />
                </td>
                <td>{formatNumber(a.connections)}</td>
                <td>{formatNumber(a.occupiedChannels)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager next={data?.appsNextCursor ?? null} paged={appCursor !== null} onPage={setAppCursor} what="apps" />
      </section>
      <section class="card">
        <h2>Push instances{data && <span class="hint"> ({formatNumber(data.pushInstancesTotal)})</span>}</h2>
        <table>
          <thead>
            <tr>
              <th>Instance id</th>
              <th>Secret key</th>
              <th>Gateways</th>
              <th>This month</th>
            </tr>
          </thead>
          <tbody>
            {data?.pushInstances.map((p) => (
              <tr key={p.instanceId}>
                <td>
                  <Link href={`/dashboard/push/${encodeURIComponent(p.instanceId)}`}>{p.instanceId}</Link>
                </td>
                <td>
                  <Secret masked={p.secretKey} path={`/push/${encodeURIComponent(p.instanceId)}/secret`} field="secretKey" />
                </td>
                <td>{p.gateways.length ? p.gateways.join(', ') : 'none configured'}</td>
                <td>{formatNumber(p.notificationsThisMonth)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager next={data?.pushInstancesNextCursor ?? null} paged={pushCursor !== null} onPage={setPushCursor} what="push instances" />
      </section>
    </div>
  );
}

/** Next page / first page of one of the overview's lists. */
function Pager(props: { next: string | null; paged: boolean; onPage: (cursor: string | null) => void; what: string }) {
  if (!props.next && !props.paged) return null;
  return (
    <div class="pager">
      {props.next && (
        <button type="button" aria-label={`Next page of ${props.what}`} onClick={() => props.onPage(props.next)}>
          Next page
        </button>
      )}
      {props.paged && (
        <button type="button" aria-label={`First page of ${props.what}`} onClick={() => props.onPage(null)}>
          First page
        </button>
      )}
    </div>
  );
}

/**
 * The threads serving the port and the connections on each, with each one's share: the kernel
 * spreads new connections over them, so a lasting imbalance shows here.
 */
function FrontEndCard({ frontEnd }: { frontEnd: FrontEndFigures | undefined }) {
  const total = frontEnd?.connections.reduce((sum, n) => sum + n, 0) ?? 0;
  return (
    <section class="card" aria-label="Front-end threads">
      <h2>
        Front-end threads{frontEnd && <span class="hint" data-threads={frontEnd.threads}> ({formatNumber(frontEnd.threads)})</span>}
      </h2>
      <table class="front-end-threads">
        <thead>
          <tr>
            <th>Thread</th>
            <th>Connections</th>
            <th>Share</th>
          </tr>
        </thead>
        <tbody>
          {frontEnd?.connections.map((n, thread) => (
            <tr key={thread} data-thread={thread}>
              <td>{thread}</td>
              <td>{formatNumber(n)}</td>
              <td>{total > 0 ? `${formatNumber((n * 100) / total)} %` : '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The cluster's nodes as Redis records them, and this node's link to Redis. */
function ClusterCard({ cluster }: { cluster: ClusterOverview }) {
  return (
    <section class="card" aria-label="Cluster">
      <h2>Cluster</h2>
      <p>
        This node <code>{cluster.nodeId}</code>, Redis <code>{cluster.redis}</code>, key prefix <code>{cluster.keyPrefix}</code>:{' '}
        {cluster.available ? 'connected' : <span class="bad">Redis unavailable, the channel API answers 503</span>}
      </p>
      <p class="hint">
        {formatNumber(cluster.watchedChannels)} channels received from other nodes, {formatNumber(cluster.relayFailures)} frames not relayed
        {cluster.reaping ? `, ${formatNumber(cluster.reaping)} silent nodes being reaped` : ''}
      </p>
      {cluster.nodes === null ? (
        <p class="bad">The nodes are unknown while Redis cannot be read.</p>
      ) : (
        <table class="cluster-nodes">
          <thead>
            <tr>
              <th>Node</th>
              <th>State</th>
              <th>Last heartbeat</th>
            </tr>
          </thead>
          <tbody>
            {cluster.nodes.map((n) => (
              <tr key={n.session}>
                <td>
                  <code>{n.nodeId}</code>
                  {n.self && <span class="badge">this node</span>}
                </td>
                <td>{n.expiresInMs >= 0 ? 'alive' : <span class="bad">silent, to be reaped</span>}</td>
                <td>{`${formatNumber(Math.max(0, cluster.nodeTimeoutMs - n.expiresInMs) / 1000, 1)} s ago`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
