/**
 * Channel view: a channel's subscribers (or members) and, for a channel whose app keeps history
 * (apps[].history), its last kept events, newest first, each with its serial. Fetched when the
 * page opens and on Refresh, not on a timer: the list stays still while it is read.
 */
import { useEffect, useState } from 'preact/hooks';
import type { ChannelView } from './api';
import { Link } from './router';
import { formatNumber, usePoll } from './util';

/** Kept events the page asks for. */
export const SHOWN_EVENTS = 50;

export function ChannelPage(props: { appId: string; channel: string }) {
  const appHref = `/dashboard/apps/${encodeURIComponent(props.appId)}`;
  const path = `/apps/${encodeURIComponent(props.appId)}/channels/${encodeURIComponent(props.channel)}?limit=${SHOWN_EVENTS}`;
  const { data, error, reload } = usePoll<ChannelView>(path, 0);
  const [loadedAt, setLoadedAt] = useState<Date | null>(null);
  useEffect(() => {
    if (data) setLoadedAt(new Date());
  }, [data]);
  return (
    <div class="stack">
      <p class="crumbs">
        <Link href="/dashboard">Overview</Link> / <Link href="/dashboard/apps">Apps</Link> / <Link href={appHref}>{props.appId}</Link> / {props.channel}
      </p>
      <h1>
        Channel <code>{props.channel}</code>
      </h1>
      {error && <p class="error">Could not load the channel: {error}</p>}
      {data && (
        <section class="stats">
          {data.userCount !== undefined ? (
            <div class="stat card">
              <div class="stat-label">Members</div>
              <div class="stat-value">{formatNumber(data.userCount)}</div>
            </div>
          ) : (
            <div class="stat card">
              <div class="stat-label">Subscribers</div>
              <div class="stat-value">{formatNumber(data.subscriptionCount)}</div>
            </div>
          )}
          <div class="stat card">
            <div class="stat-label">Kept events</div>
            <div class="stat-value">{data.history ? formatNumber(data.history.events.length) + (data.history.complete ? '' : '+') : 'none'}</div>
          </div>
        </section>
      )}
      <section class="card" aria-label="History">
        <h2>History</h2>
        <div class="toolbar">
          <button type="button" onClick={reload}>
            Refresh
          </button>
          {loadedAt && <span class="hint">Loaded at {loadedAt.toLocaleTimeString()}</span>}
        </div>
        {data && <History view={data} />}
      </section>
    </div>
  );
}

function History(props: { view: ChannelView }) {
  const { history, historyChannels } = props.view;
  if (!history) {
    return (
      <p class="notice" role="status">
        {historyChannels === null ? (
          <span>
            This channel keeps no history: the app keeps none (<code>apps[].history</code> is not set).
          </span>
        ) : (
          <span>
            This channel keeps no history: no pattern of the app's <code>apps[].history</code> channels names it ({historyChannels.map((p, i) => (
              <span key={p}>
                {i > 0 && ', '}
                <code>{p}</code>
              </span>
            ))}).
          </span>
        )}
      </p>
    );
  }
  const events = [...history.events].reverse();
  return (
    <>
      <p class="hint">
        Up to the last {SHOWN_EVENTS} kept events, newest first. The app keeps the last {formatNumber(history.maxEvents)} per channel for {formatNumber(history.ttlSeconds)} s.
        {!history.complete && ' Older kept events are not shown.'}
      </p>
      <ol class="kept">
        {events.length === 0 && <li class="empty">No kept events: nothing was published on this channel within the last {formatNumber(history.ttlSeconds)} s.</li>}
        {events.map((e) => (
          <li key={e.serial} class="kept-event" data-serial={e.serial}>
            <div class="kept-head">
              <span class="kept-name">{e.event}</span>
              <time dateTime={e.publishedAt}>{new Date(e.publishedAt).toLocaleString()}</time>
            </div>
            <div class="kept-serial">
              serial <code>{e.serial}</code>
              {e.userId !== undefined && (
                <span>
                  {' '}
                  · user <code>{e.userId}</code>
                </span>
              )}
            </div>
            <pre class="kept-data">
              {e.data}
              {e.dataTruncated && <span class="hint">{` … (${formatNumber(e.dataBytes)} bytes in all)`}</span>}
            </pre>
          </li>
        ))}
      </ol>
    </>
  );
}
