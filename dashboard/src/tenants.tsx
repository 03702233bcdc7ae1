/**
 * The Apps and Push instances pages: tenants managed through the admin API (create, edit
 * limits and flags, rotate a secret with a grace period, disable, delete with confirmation),
 * a page of 50 at a time with a filter; each app shows how often its rate limits refused.
 */
import { useState } from 'preact/hooks';
import { ApiError, api } from './api';
import { Link } from './router';
import { usePoll } from './util';

const LIMITS = ['maxConnections', 'maxHttpRequestsPerSecond', 'maxEventsPerSecond', 'maxNewConnectionsPerSecond', 'maxNewConnectionsPerSecondPerIp'] as const;
const FLAGS = ['enabled', 'clientEvents', 'userAuthentication', 'requireUserAuthentication', 'subscriptionCount'] as const;

interface TenantApp {
  id: string;
  key: string;
  source: 'config' | 'api';
  connections: number;
  rateLimited: Record<string, number>;
  previousSecretValidUntil?: string;
  [field: string]: unknown;
}

interface TenantPush {
  instanceId: string;
  source: 'config' | 'api';
  maxPublishesPerSecond: number;
  previousSecretValidUntil?: string;
}

function message(err: unknown): string {
  return err instanceof ApiError ? `${err.status}: ${err.message}` : String(err);
}

/** The result of the last action: a new secret to copy, or an error. */
function Notice(props: { notice: { kind: 'ok' | 'error'; text: string } | null }) {
  if (!props.notice) return null;
  return (
    <p class={props.notice.kind === 'error' ? 'error' : 'notice'} role={props.notice.kind === 'error' ? 'alert' : 'status'}>
      {props.notice.text}
    </p>
  );
}

export function AppsPage() {
  const [filter, setFilter] = useState('');
  const [cursor, setCursor] = useState<string | null>(null);
  const path = `/apps?limit=50${filter ? `&filter=${encodeURIComponent(filter)}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
  const { data, error, reload } = usePoll<{ apps: TenantApp[]; nextCursor: string | null }>(path, 3000);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const [newId, setNewId] = useState('');
  const [newKey, setNewKey] = useState('');
  const [editing, setEditing] = useState<string | null>(null);

  const act = async (work: () => Promise<string | null>) => {
    try {
      const text = await work();
      setNotice(text === null ? null : { kind: 'ok', text });
    } catch (err) {
      setNotice({ kind: 'error', text: message(err) });
    }
    reload();
  };
  const create = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      const created = await api<{ id: string; secret: string }>('/apps', { method: 'POST', body: { id: newId, key: newKey } });
      setNewId('');
      setNewKey('');
      return `App ${created.id} created. Its secret (shown once): ${created.secret}`;
    });
  };

  return (
    <div class="stack">
      <section class="card">
        <h2>Apps</h2>
        <form class="inline-form" onSubmit={create} aria-label="New app">
          <input aria-label="New app id" placeholder="app id" value={newId} onInput={(e) => setNewId((e.target as HTMLInputElement).value)} required />
          <input aria-label="New app key" placeholder="app key" value={newKey} onInput={(e) => setNewKey((e.target as HTMLInputElement).value)} required />
          <button type="submit">Create app</button>
        </form>
        <Notice notice={notice} />
        <input
          aria-label="Filter apps"
          placeholder="filter by id or key"
          value={filter}
          onInput={(e) => {
            setFilter((e.target as HTMLInputElement).value);
            setCursor(null);
          }}
        />
        {error && <p class="error">Could not load the apps: {error}</p>}
        <div class="table-scroll">
          <table class="apps tenants">
            <thead>
              <tr>
                <th>App</th>
                <th>Key</th>
                <th>Connections</th>
                <th>Limits hit</th>
                <th>Actions</th>
              </tr>
            </thead>
            <tbody>
              {data?.apps.map((a) => (
                <tr key={a.id} data-app={a.id}>
                  <td>
                    <Link href={`/dashboard/apps/${encodeURIComponent(a.id)}`}>{a.id}</Link>
                    {a.enabled === false && <span class="badge">disabled</span>}
                    {a.source === 'config' && <span class="badge">config file</span>}
                  </td>
                  <td>{a.key}</td>
                  <td>{a.connections}</td>
                  <td class="limits-hit">
                    {Object.keys(a.rateLimited).length === 0 ? '—' : Object.entries(a.rateLimited).map(([limit, n]) => <div key={limit}>{limit}: {n}</div>)}
                  </td>
                  <td>
                    {a.source === 'api' ? (
                      <div class="actions">
                        <button type="button" onClick={() => setEditing(editing === a.id ? null : a.id)}>Edit</button>
                        <button
                          type="button"
                          onClick={() => void act(async () => (await api('/apps/' + encodeURIComponent(a.id), { method: 'PATCH', body: { enabled: a.enabled === false } }), null))}
                        >
                          {a.enabled === false ? 'Enable' : 'Disable'}
                        </button>
                        <button
                          type="button"
                          onClick={() => {
                            const grace = window.prompt(`Rotate the secret of ${a.id}: seconds the old secret stays valid`, '0');
                            if (grace === null) return;
                            void act(async () => {
                              const r = await api<{ secret: string }>(`/apps/${encodeURIComponent(a.id)}/rotate-secret`, { method: 'POST', body: { graceSeconds: Number(grace) } });
                              return `New secret of ${a.id} (shown once): ${r.secret}`;
                            });
                          }}
                        >
                          Rotate secret
                        </button>
                        <button
                          type="button"
                          class="danger"
                          onClick={() => {
                            if (!window.confirm(`Delete app ${a.id}? Its connections are closed and its key stops working.`)) return;
                            void act(async () => (await api('/apps/' + encodeURIComponent(a.id), { method: 'DELETE' }), `App ${a.id} deleted.`));
                          }}
                        >
                          Delete
                        </button>
                      </div>
                    ) : (
                      <span class="hint">edit in the config file</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {data?.nextCursor && (
          <button type="button" onClick={() => setCursor(data.nextCursor)}>
            Next page
          </button>
        )}
        {cursor && (
          <button type="button" onClick={() => setCursor(null)}>
            First page
          </button>
        )}
      </section>
      {editing && data?.apps.find((a) => a.id === editing) && (
        <AppEditor key={editing} app={data.apps.find((a) => a.id === editing)!} onSaved={(text) => void act(async () => text)} onDone={() => setEditing(null)} />
      )}
    </div>
  );
}

/** Limits (empty = unlimited) and flags of one API-created app. */
function AppEditor(props: { app: TenantApp; onSaved: (text: string) => void; onDone: () => void }) {
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(LIMITS.map((l) => [l, props.app[l] === null || props.app[l] === undefined ? '' : String(props.app[l])])),
  );
  const [flags, setFlags] = useState<Record<string, boolean>>(() => Object.fromEntries(FLAGS.map((f) => [f, props.app[f] === true])));
  const [error, setError] = useState<string | null>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { ...flags };
    for (const l of LIMITS) body[l] = values[l] === '' ? null : Number(values[l]);
    try {
      await api(`/apps/${encodeURIComponent(props.app.id)}`, { method: 'PATCH', body });
      props.onSaved(`App ${props.app.id} saved.`);
      props.onDone();
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <section class="card" aria-label={`Edit ${props.app.id}`}>
      <h2>Edit {props.app.id}</h2>
      <form class="editor" onSubmit={save}>
        {LIMITS.map((l) => (
          <label key={l}>
            {l}
            <input inputMode="numeric" aria-label={l} placeholder="unlimited" value={values[l]} onInput={(e) => setValues({ ...values, [l]: (e.target as HTMLInputElement).value })} />
          </label>
        ))}
        {FLAGS.map((f) => (
          <label key={f} class="check">
            <input type="checkbox" aria-label={f} checked={flags[f]} onChange={(e) => setFlags({ ...flags, [f]: (e.target as HTMLInputElement).checked })} />
            {f}
          </label>
        ))}
        <button type="submit">Save</button>
        <button type="button" class="ghost" onClick={props.onDone}>
          Cancel
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </section>
  );
}

export function PushInstancesPage() {
  const { data, error, reload } = usePoll<{ push: TenantPush[]; nextCursor: string | null }>('/push?limit=100', 3000);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  const act = async (work: () => Promise<string | null>) => {
    try {
      const text = await work();
      setNotice(text === null ? null : { kind: 'ok', text });
    } catch (err) {
      setNotice({ kind: 'error', text: message(err) });
    }
    reload();
  };
  return (
    <section class="card">
      <h2>Push instances</h2>
      <button
        type="button"
        onClick={() =>
          void act(async () => {
            const created = await api<{ instanceId: string; secretKey: string }>('/push', { method: 'POST', body: {} });
            return `Instance ${created.instanceId} created. Its secret key (shown once): ${created.secretKey}`;
          })
        }
      >
        Create push instance
      </button>
      <Notice notice={notice} />
      {error && <p class="error">Could not load the push instances: {error}</p>}
      <div class="table-scroll">
        <table class="apps tenants">
          <thead>
            <tr>
              <th>Instance</th>
              <th>Publishes/s</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {data?.push.map((p) => (
              <tr key={p.instanceId} data-instance={p.instanceId}>
                <td>
                  <Link href={`/dashboard/push/${encodeURIComponent(p.instanceId)}`}>{p.instanceId}</Link>
                  {p.source === 'config' && <span class="badge">config file</span>}
                </td>
                <td>{p.maxPublishesPerSecond}</td>
                <td>
                  {p.source === 'api' ? (
                    <div class="actions">
                      <button
                        type="button"
                        onClick={() => {
                          const grace = window.prompt(`Rotate the secret key of ${p.instanceId}: seconds the old key stays valid`, '0');
                          if (grace === null) return;
                          void act(async () => {
                            const r = await api<{ secretKey: string }>(`/push/${encodeURIComponent(p.instanceId)}/rotate-secret`, { method: 'POST', body: { graceSeconds: Number(grace) } });
                            return `New secret key of ${p.instanceId} (shown once): ${r.secretKey}`;
                          });
                        }}
                      >
                        Rotate secret key
                      </button>
                      <button
                        type="button"
                        class="danger"
                        onClick={() => {
                          if (!window.confirm(`Delete push instance ${p.instanceId}?`)) return;
                          void act(async () => (await api('/push/' + encodeURIComponent(p.instanceId), { method: 'DELETE' }), `Instance ${p.instanceId} deleted.`));
                        }}
                      >
                        Delete
                      </button>
                    </div>
                  ) : (
                    <span class="hint">edit in the config file</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
