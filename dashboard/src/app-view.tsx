/** App view: live connections, occupied channels, the debug console and the event creator. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, openStream, type AppView, type Stats } from './api';
import { Link, navigate } from './router';
import { Secret, Stat, formatNumber, formatTime, usePoll } from './util';

/** Entries the console keeps; older ones are dropped (the page stays light). */
export const CONSOLE_LIMIT = 500;

type Kind = 'connection' | 'subscription' | 'api_event' | 'client_event' | 'webhook';

const KIND_LABELS: Record<Kind, string> = {
  connection: 'Connections',
  subscription: 'Subscriptions',
  api_event: 'API events',
  client_event: 'Client events',
  webhook: 'Webhooks',
};

interface DebugEntry {
  id: number;
  t: number;
  kind: Kind;
  action?: string;
  socketId?: string;
  code?: number;
  channel?: string;
  channels?: string[];
  subscriptionCount?: number;
  event?: string;
  data?: string;
  dataBytes?: number;
  userId?: string;
  url?: string;
  events?: string[];
  ok?: boolean;
  status?: number;
  error?: string;
}

function entryChannels(e: DebugEntry): string[] {
  return e.channels ?? (e.channel ? [e.channel] : []);
}

function describe(e: DebugEntry): { title: string; detail: string } {
  switch (e.kind) {
    case 'connection':
      return { title: `Connection ${e.action}`, detail: `socket ${e.socketId}${e.code !== undefined ? `, close code ${e.code}` : ''}` };
    case 'subscription':
      return { title: `${e.action === 'subscribed' ? 'Subscribed' : 'Unsubscribed'} ${e.channel}`, detail: `socket ${e.socketId}, ${e.subscriptionCount} subscriber(s)` };
    case 'api_event':
      return { title: `API event ${e.event} on ${entryChannels(e).join(', ')}`, detail: `${e.data ?? ''}${e.socketId ? ` (excluding ${e.socketId})` : ''}` };
    case 'client_event':
      return { title: `Client event ${e.event} on ${e.channel}`, detail: `${e.data ?? ''} (from ${e.userId ? `user ${e.userId}, ` : ''}socket ${e.socketId})` };
    case 'webhook':
      return { title: `Webhook ${e.ok ? 'sent' : 'failed'}: ${(e.events ?? []).join(', ')}`, detail: `${e.url}${e.status ? ` → HTTP ${e.status}` : ''}${e.error && !e.ok ? ` (${e.error})` : ''}` };
  }
}

function DebugConsole(props: { appId: string; onStats: (s: Stats) => void }) {
  const [entries, setEntries] = useState<DebugEntry[]>([]);
  const [paused, setPaused] = useState(false);
  const [channelFilter, setChannelFilter] = useState('');
  const [kinds, setKinds] = useState<Record<Kind, boolean>>({ connection: true, subscription: true, api_event: true, client_event: true, webhook: true });
  const [sampling, setSampling] = useState<{ every: number; eventsLastSecond: number } | null>(null);
  const [connected, setConnected] = useState(false);
  const [dropped, setDropped] = useState(0);
  const pausedRef = useRef(false);
  const nextId = useRef(1);
  pausedRef.current = paused;

  useEffect(
    () =>
      openStream(props.appId, {
        onState: setConnected,
        onEvent: (type, payload) => {
          if (type === 'stats') {
            const s = payload as Stats;
            setDropped(s.dropped);
            props.onStats(s);
          } else if (type === 'sampling') {
            const s = payload as { every: number; eventsLastSecond: number };
            setSampling(s.every > 1 ? s : null);
          } else if (type === 'debug' && !pausedRef.current) {
            const entry = { ...(payload as DebugEntry), id: nextId.current++ };
            setEntries((list) => [entry, ...list].slice(0, CONSOLE_LIMIT));
          }
        },
      }),
    [props.appId],
  );

  const filter = channelFilter.trim();
  const shown = entries.filter((e) => kinds[e.kind] && (filter === '' || entryChannels(e).some((c) => c.includes(filter))));
  return (
    <section class="card" aria-label="Debug console">
      <h2>
        Debug console <span class={connected ? 'dot ok' : 'dot'} title={connected ? 'live' : 'connecting'} />
      </h2>
      <div class="toolbar">
        <button type="button" onClick={() => setPaused(!paused)}>
          {paused ? 'Resume' : 'Pause'}
        </button>
        <button type="button" class="ghost" onClick={() => setEntries([])}>
          Clear
        </button>
        <label class="inline">
          Filter by channel
          <input type="search" value={channelFilter} onInput={(e) => setChannelFilter((e.target as HTMLInputElement).value)} placeholder="channel name contains…" />
        </label>
      </div>
      <fieldset class="kinds">
        <legend>Show</legend>
        {(Object.keys(KIND_LABELS) as Kind[]).map((k) => (
          <label key={k} class="check">
            <input type="checkbox" checked={kinds[k]} onChange={() => setKinds({ ...kinds, [k]: !kinds[k] })} />
            {KIND_LABELS[k]}
          </label>
        ))}
      </fieldset>
      {paused && <p class="notice">Paused: new events are not shown until you resume.</p>}
      {sampling && (
        <p class="notice" role="status">
          Sampled under load: showing about 1 in {sampling.every} events ({formatNumber(sampling.eventsLastSecond)} events in the last second).
        </p>
      )}
      {dropped > 0 && <p class="notice">{formatNumber(dropped)} events were dropped because this page could not keep up.</p>}
      <ol class="console" aria-live="off">
        {shown.length === 0 && <li class="empty">Waiting for events… connect a client or send one below.</li>}
        {shown.map((e) => {
          const d = describe(e);
          return (
            <li key={e.id} class={`entry ${e.kind}`} data-kind={e.kind}>
              <time>{formatTime(e.t)}</time>
              <span class="kind">{KIND_LABELS[e.kind]}</span>
              <span class="title">{d.title}</span>
              <span class="detail">{d.detail}</span>
            </li>
          );
        })}
      </ol>
      <p class="hint">The newest {CONSOLE_LIMIT} events are kept. Events are only collected while this page is open.</p>
    </section>
  );
}

function EventCreator(props: { appId: string }) {
  const [channel, setChannel] = useState('');
  const [event, setEvent] = useState('');
  const [data, setData] = useState('{"message":"hello"}');
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const send = async (e: Event) => {
    e.preventDefault();
    try {
      await api(`/apps/${encodeURIComponent(props.appId)}/events`, { method: 'POST', body: { channel, event, data } });
      setResult({ ok: true, text: `Sent ${event} to ${channel}.` });
    } catch (err) {
      setResult({ ok: false, text: err instanceof ApiError ? err.message : String(err) });
    }
  };
  return (
    <section class="card">
      <h2>Event creator</h2>
      <form class="form" onSubmit={send}>
        <label for="ec-channel">Channel</label>
        <input id="ec-channel" value={channel} onInput={(e) => setChannel((e.target as HTMLInputElement).value)} required placeholder="my-channel" />
        <label for="ec-event">Event</label>
        <input id="ec-event" value={event} onInput={(e) => setEvent((e.target as HTMLInputElement).value)} required placeholder="my-event" />
        <label for="ec-data">Data</label>
        <textarea id="ec-data" rows={4} value={data} onInput={(e) => setData((e.target as HTMLTextAreaElement).value)} />
        <button type="submit">Send event</button>
        {result && (
          <p class={result.ok ? 'ok' : 'error'} role="status">
            {result.text}
          </p>
        )}
      </form>
    </section>
  );
}

/** The channel page of a channel (channel-view.tsx). */
function channelHref(appId: string, channel: string): string {
  return `/dashboard/apps/${encodeURIComponent(appId)}/channels/${encodeURIComponent(channel)}`;
}

export function AppPage(props: { appId: string }) {
  const path = `/apps/${encodeURIComponent(props.appId)}`;
  const { data, error } = usePoll<AppView>(path, 2000);
  const [connections, setConnections] = useState<number | null>(null);
  const [filter, setFilter] = useState('');
  const [openName, setOpenName] = useState('');
  const channels = (data?.channels ?? []).filter((c) => c.name.includes(filter.trim()));
  return (
    <div class="stack">
      <p class="crumbs">
        <Link href="/dashboard">Overview</Link> / <Link href="/dashboard/apps">Apps</Link> / {props.appId}
      </p>
      <h1>App {props.appId}</h1>
      {error && <p class="error">Could not load the app: {error}</p>}
      {data && (
        <section class="stats">
          <Stat label="Connections" value={formatNumber(connections ?? data.app.connections)} />
          <Stat label="Occupied channels" value={formatNumber(data.occupiedChannels)} />
          <div class="stat card">
            <div class="stat-label">Key / secret</div>
            <div class="stat-value small">
              <code>{data.app.key}</code>
            </div>
            <Secret masked={data.app.secret} path={`${path}/secret`} field="secret" />
          </div>
        </section>
      )}
      <div class="columns">
        <section class="card" aria-label="Channels">
          <h2>Channels</h2>
          <label class="inline">
            Filter channels
            <input type="search" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
          </label>
          <table class="channels">
            <thead>
              <tr>
                <th>Channel</th>
                <th>Subscribers / members</th>
              </tr>
            </thead>
            <tbody>
              {channels.map((c) => (
                <tr key={c.name} data-channel={c.name}>
                  <td>
                    <Link href={channelHref(props.appId, c.name)}>
                      <code>{c.name}</code>
                    </Link>
                  </td>
                  <td>{c.userCount !== undefined ? `${formatNumber(c.userCount)} member(s)` : `${formatNumber(c.subscriptionCount)} subscriber(s)`}</td>
                </tr>
              ))}
              {channels.length === 0 && (
                <tr>
                  <td colSpan={2} class="empty">
                    No occupied channels{filter ? ' match the filter' : ''}.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          {data?.channelsTruncated && <p class="hint">Only the first channels are listed.</p>}
          <form
            class="inline-form open-channel"
            onSubmit={(e) => {
              e.preventDefault();
              if (openName.trim() !== '') navigate(channelHref(props.appId, openName.trim()));
            }}
          >
            <label class="inline">
              Open a channel, occupied or not (its history)
              <input value={openName} onInput={(e) => setOpenName((e.target as HTMLInputElement).value)} placeholder="history-room-1" />
            </label>
            <button type="submit">Open</button>
          </form>
        </section>
        <EventCreator appId={props.appId} />
      </div>
      <DebugConsole appId={props.appId} onStats={(s) => setConnections(s.appConnections ?? null)} />
    </div>
  );
}
