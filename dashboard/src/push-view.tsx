/** Push instance view: devices by platform, recent publishes with their state, a test notification. */
import { useState } from 'preact/hooks';
import { ApiError, api, type GatewayCounts, type PushView } from './api';
import { Link } from './router';
import { Secret, Stat, formatNumber, formatTime, usePoll } from './util';

type TargetKind = 'interest' | 'userId' | 'deviceId';
const TARGET_LABELS: Record<TargetKind, string> = { interest: 'Interest', userId: 'User id', deviceId: 'Device id' };
const KIND_LABELS: Record<string, string> = { interests: 'interests', users: 'users', devices: 'devices' };
const PLATFORM_LABELS: Record<string, string> = { apns: 'APNs', fcm: 'FCM', web: 'Web push' };

/** Platforms the instance has no credentials for: their devices fail with "no credentials for <platform>". */
function MissingCredentials(props: { configured: string[] }) {
  const missing = Object.keys(PLATFORM_LABELS).filter((p) => !props.configured.includes(p));
  if (missing.length === 0) return null;
  return (
    <p class="notice" role="note" data-missing-credentials={missing.join(' ')}>
      No credentials for {missing.map((p) => PLATFORM_LABELS[p]).join(', ')}: notifications to {missing.length === 1 ? 'its' : 'their'} devices fail
      (reason “no credentials for …”). Add <code>{missing.map((p) => `push[].${p}`).join(', ')}</code> to the config; see docs/push-credentials.md.
    </p>
  );
}

/** Each gateway's failures by reason, most frequent first. */
function FailureReasons(props: { gateways: Record<string, GatewayCounts> }) {
  const rows = Object.entries(props.gateways).flatMap(([gateway, c]) =>
    Object.entries(c.errors ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([reason, n]) => ({ gateway, reason, n })),
  );
  if (rows.length === 0) return null;
  return (
    <ul class="reasons" aria-label="Failure reasons">
      {rows.map((r) => (
        <li key={`${r.gateway} ${r.reason}`}>
          <span class="bad">{formatNumber(r.n)} failed</span> on {r.gateway}: {r.reason}
        </li>
      ))}
    </ul>
  );
}

function TestNotification(props: { instanceId: string; onSent: () => void }) {
  const [target, setTarget] = useState<TargetKind>('interest');
  const [value, setValue] = useState('');
  const [title, setTitle] = useState('Hello from Herald');
  const [body, setBody] = useState('A test notification');
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const send = async (e: Event) => {
    e.preventDefault();
    try {
      const res = await api<{ publishId: string }>(`/push/${encodeURIComponent(props.instanceId)}/publishes`, {
        method: 'POST',
        body: { [target]: value, title, body },
      });
      setResult({ ok: true, text: `Published ${res.publishId}.` });
      props.onSent();
    } catch (err) {
      setResult({ ok: false, text: err instanceof ApiError ? err.message : String(err) });
    }
  };
  return (
    <section class="card">
      <h2>Test notification</h2>
      <form class="form" onSubmit={send}>
        <label for="tn-target">Send to</label>
        <select id="tn-target" value={target} onChange={(e) => setTarget((e.target as HTMLSelectElement).value as TargetKind)}>
          {(Object.keys(TARGET_LABELS) as TargetKind[]).map((kind) => (
            <option value={kind}>{TARGET_LABELS[kind]}</option>
          ))}
        </select>
        <label for="tn-value">{TARGET_LABELS[target]}</label>
        <input id="tn-value" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} required />
        <label for="tn-title">Title</label>
        <input id="tn-title" value={title} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} required />
        <label for="tn-body">Body</label>
        <input id="tn-body" value={body} onInput={(e) => setBody((e.target as HTMLInputElement).value)} required />
        <button type="submit">Send test notification</button>
        {result && (
          <p class={result.ok ? 'ok' : 'error'} role="status">
            {result.text}
          </p>
        )}
      </form>
    </section>
  );
}

export function PushPage(props: { instanceId: string }) {
  const path = `/push/${encodeURIComponent(props.instanceId)}`;
  const { data, error, reload } = usePoll<PushView>(path, 2000);
  return (
    <div class="stack">
      <p class="crumbs">
        <Link href="/dashboard">Overview</Link> / <Link href="/dashboard/push">Push instances</Link> / {props.instanceId}
      </p>
      <h1 class="wrap">Push instance {props.instanceId}</h1>
      {error && <p class="error">Could not load the instance: {error}</p>}
      {data && <MissingCredentials configured={data.instance.gateways} />}
      {data && (
        <section class="stats" aria-label="Devices">
          <Stat label="Devices" value={formatNumber(data.devices.total)} />
          <Stat label="APNs" value={formatNumber(data.devices.apns)} />
          <Stat label="FCM" value={formatNumber(data.devices.fcm)} />
          <Stat label="Web push" value={formatNumber(data.devices.web)} />
          <div class="stat card">
            <div class="stat-label">Secret key</div>
            <Secret masked={data.instance.secretKey} path={`${path}/secret`} field="secretKey" />
          </div>
        </section>
      )}
      <section class="card" aria-label="Recent publishes">
        <h2>Recent publishes</h2>
        <ol class="publishes">
          {data?.publishes.length === 0 && <li class="empty">No publishes since this server started.</li>}
          {data?.publishes.map((p) => (
            <li key={p.publishId} class="publish" data-publish-id={p.publishId}>
              <div class="publish-head">
                <code>{p.publishId}</code>
                <span class={`badge state-${p.state}`} data-state={p.state}>
                  {p.state}
                </span>
              </div>
              <div class="publish-meta">
                {formatTime(p.acceptedAt)} · {KIND_LABELS[p.kind] ?? p.kind}: {p.targets.join(', ')} · {formatNumber(p.recipients)} recipient(s) ·{' '}
                {formatNumber(p.delivered)} delivered · {formatNumber(p.opened)} opened
              </div>
              {Object.keys(p.gateways).length > 0 && (
                <table class="gateways">
                  <thead>
                    <tr>
                      <th>Gateway</th>
                      <th>Recipients</th>
                      <th>Sent</th>
                      <th>Failed</th>
                      <th title="Devices removed: the gateway said their token is dead">Removed</th>
                    </tr>
                  </thead>
                  <tbody>
                    {Object.entries(p.gateways).map(([gateway, c]) => (
                      <tr key={gateway}>
                        <td>{gateway}</td>
                        <td>{formatNumber(c.recipients)}</td>
                        <td>{formatNumber(c.sent)}</td>
                        <td class={c.failed > 0 ? 'bad' : undefined}>{formatNumber(c.failed)}</td>
                        <td>{formatNumber(c.removed)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
              <FailureReasons gateways={p.gateways} />
            </li>
          ))}
        </ol>
      </section>
      <TestNotification instanceId={props.instanceId} onSent={reload} />
    </div>
  );
}
