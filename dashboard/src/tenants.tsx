/**
 * The Apps and Push instances pages: tenants managed through the admin API (create, edit
 * limits, flags and push credentials, rotate a secret with a grace period, disable, delete with
 * confirmation),
 * a page of 50 at a time with a filter; each app shows how often its rate limits refused.
 * Both are one TenantsPage, told by a TenantKind what differs: the API path, the columns,
 * the create form, the secret's name and whether entries can be edited and disabled.
 */
import { Fragment, type ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api } from './api';
import { Link } from './router';
import { usePoll } from './util';

/** An app's limits and flags: the admin API's field and its name for people. */
const LIMITS = [
  { field: 'maxConnections', label: 'Max connections' },
  { field: 'maxHttpRequestsPerSecond', label: 'HTTP requests per second' },
  { field: 'maxEventsPerSecond', label: 'Events per second' },
  { field: 'maxNewConnectionsPerSecond', label: 'New connections per second' },
  { field: 'maxNewConnectionsPerSecondPerIp', label: 'New connections per second per IP' },
] as const;
const FLAGS = [
  { field: 'enabled', label: 'Enabled' },
  { field: 'clientEvents', label: 'Client events' },
  { field: 'userAuthentication', label: 'User authentication' },
  { field: 'requireUserAuthentication', label: 'Require user authentication' },
  { field: 'subscriptionCount', label: 'Subscription count events' },
] as const;

/** A field's API name as a hint under its label, breakable only where its words meet. */
function FieldName(props: { name: string }) {
  const parts = props.name.split(/(?=[A-Z])/);
  return (
    <code class="field-name">
      {parts.map((part, i) => (
        <>
          {i > 0 && <wbr />}
          {part}
        </>
      ))}
    </code>
  );
}

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
  notificationQuota: number | null;
  apns: unknown;
  fcm: unknown;
  web: unknown;
  previousSecretValidUntil?: string;
  [field: string]: unknown;
}

const PLATFORMS = [
  { field: 'apns', label: 'APNs' },
  { field: 'fcm', label: 'FCM' },
  { field: 'web', label: 'Web push' },
] as const;

/** What the list of one kind of tenant needs to know (TenantsPage). */
interface TenantKind<T extends { source: 'config' | 'api'; [field: string]: unknown }> {
  /** Page heading, and the noun of the error line ("Could not load the apps"). */
  title: string;
  plural: string;
  /** Admin API path (`/apps`, `/push`) and the list field of its answer. */
  path: string;
  listField: string;
  /** The noun in messages: "App", "Instance". */
  noun: string;
  /** "app", "push instance": in the confirmation and the filter label. */
  lowerNoun: string;
  idOf(tenant: T): string;
  /** The row's data attribute (`data-app`, `data-instance`). */
  rowAttribute: string;
  detailHref(id: string): string;
  /** The secret field of the create and rotate answers, and its name for people. */
  secretField: string;
  secretName: string;
  /** Columns after the id, before the actions. */
  columns: { header: string; class?: string; cell(tenant: T): ComponentChildren }[];
  /** Create form fields (the body's fields); none: one button creates with generated values. */
  createFields: { field: string; label: string; placeholder: string }[];
  createLabel: string;
  deleteWarning: string;
  /** The Edit button's form, opened in place under the entry's row. */
  editor?: (tenant: T, onSaved: (text: string) => void, onDone: () => void) => ComponentChildren;
  /** Whether the entry has an `enabled` flag to toggle. */
  canDisable: boolean;
  /** What the list's filter matches (the API's `filter`). */
  filterPlaceholder: string;
}

const APPS: TenantKind<TenantApp> = {
  title: 'Apps',
  plural: 'apps',
  path: '/apps',
  listField: 'apps',
  noun: 'App',
  lowerNoun: 'app',
  idOf: (a) => a.id,
  rowAttribute: 'data-app',
  detailHref: (id) => `/dashboard/apps/${encodeURIComponent(id)}`,
  secretField: 'secret',
  secretName: 'secret',
  columns: [
    { header: 'Key', cell: (a) => a.key },
    { header: 'Connections', cell: (a) => a.connections },
    {
      header: 'Limits hit',
      class: 'limits-hit',
      cell: (a) => (Object.keys(a.rateLimited).length === 0 ? '—' : Object.entries(a.rateLimited).map(([limit, n]) => <div key={limit}>{limit}: {n}</div>)),
    },
  ],
  createFields: [
    { field: 'id', label: 'New app id', placeholder: 'app id' },
    { field: 'key', label: 'New app key', placeholder: 'app key' },
  ],
  createLabel: 'Create app',
  deleteWarning: 'Its connections are closed and its key stops working.',
  editor: (app, onSaved, onDone) => <AppEditor key={app.id} app={app} onSaved={onSaved} onDone={onDone} />,
  canDisable: true,
  filterPlaceholder: 'filter by id or key',
};

const PUSH: TenantKind<TenantPush> = {
  title: 'Push instances',
  plural: 'push instances',
  path: '/push',
  listField: 'push',
  noun: 'Instance',
  lowerNoun: 'push instance',
  idOf: (p) => p.instanceId,
  rowAttribute: 'data-instance',
  detailHref: (id) => `/dashboard/push/${encodeURIComponent(id)}`,
  secretField: 'secretKey',
  secretName: 'secret key',
  columns: [
    { header: 'Publishes/s', cell: (p) => p.maxPublishesPerSecond },
    {
      header: 'Credentials',
      class: 'credentials',
      cell: (p) => PLATFORMS.filter((pl) => p[pl.field] !== null && p[pl.field] !== undefined).map((pl) => pl.label).join(', ') || 'none',
    },
  ],
  createFields: [],
  createLabel: 'Create push instance',
  deleteWarning: 'Its device API and publishes stop working.',
  editor: (instance, onSaved, onDone) => <PushEditor key={instance.instanceId} instance={instance} onSaved={onSaved} onDone={onDone} />,
  canDisable: true,
  filterPlaceholder: 'filter by instance id',
};

function message(err: unknown): string {
  return err instanceof ApiError ? `${err.status}: ${err.message}` : String(err);
}

interface NoticeText {
  kind: 'ok' | 'error';
  text: string;
  /** A secret shown once: the notice has a Copy button for it. */
  copy?: string;
}

/** Copies text: the Clipboard API, or a selected textarea where that is missing or refused. */
async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const field = document.createElement('textarea');
    field.value = text;
    field.setAttribute('readonly', '');
    field.style.position = 'fixed';
    field.style.opacity = '0';
    document.body.appendChild(field);
    field.select();
    const copied = document.execCommand('copy');
    field.remove();
    return copied;
  }
}

/** The result of the last action: a new secret to copy, or an error. */
function Notice(props: { notice: NoticeText | null }) {
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null);
  const box = useRef<HTMLParagraphElement>(null);
  // A new notice is brought into view: the action may have been taken far down the list.
  useEffect(() => {
    setCopied(null);
    box.current?.scrollIntoView({ block: 'nearest' });
  }, [props.notice]);
  const { notice } = props;
  if (!notice) return null;
  return (
    <p ref={box} class={notice.kind === 'error' ? 'error' : 'notice'} role={notice.kind === 'error' ? 'alert' : 'status'}>
      <span class="notice-text">{notice.text}</span>
      {notice.copy !== undefined && (
        <button type="button" class="small ghost" onClick={() => void copyText(notice.copy!).then((ok) => setCopied(ok ? 'yes' : 'no'))}>
          {copied === 'yes' ? 'Copied' : copied === 'no' ? 'Copy failed: select the text' : 'Copy'}
        </button>
      )}
    </p>
  );
}

/** A form opened in place under a row: scrolled into view, its first field focused. */
function InPlace(props: { columns: number; children: ComponentChildren }) {
  const cell = useRef<HTMLTableCellElement>(null);
  useEffect(() => {
    const el = cell.current;
    if (!el) return;
    el.querySelector<HTMLElement>('input, textarea, select, button')?.focus({ preventScroll: true });
    el.scrollIntoView({ block: 'nearest' });
  }, []);
  return (
    <tr class="in-place">
      <td colSpan={props.columns} ref={cell}>
        {props.children}
      </td>
    </tr>
  );
}

/** The rotate form: seconds the old secret stays valid, and the Rotate button. */
function RotateForm(props: { id: string; secretName: string; onRotate: (graceSeconds: number) => void; onDone: () => void }) {
  const [grace, setGrace] = useState('0');
  const submit = (e: Event) => {
    e.preventDefault();
    props.onRotate(Number(grace));
    props.onDone();
  };
  return (
    <form class="card rotate-form" aria-label={`Rotate the ${props.secretName} of ${props.id}`} onSubmit={submit}>
      <label>
        Seconds the old {props.secretName} stays valid
        <input type="number" min={0} max={604800} step={1} required value={grace} onInput={(e) => setGrace((e.target as HTMLInputElement).value)} />
      </label>
      <div class="actions">
        <button type="submit">Rotate</button>
        <button type="button" class="ghost" onClick={props.onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function AppsPage() {
  return <TenantsPage kind={APPS} />;
}

export function PushInstancesPage() {
  return <TenantsPage kind={PUSH} />;
}

/** One kind of tenant: the list (50 a page, a filter), create, edit, disable, rotate, delete. */
function TenantsPage<T extends { source: 'config' | 'api'; [field: string]: unknown }>(props: { kind: TenantKind<T> }) {
  const { kind } = props;
  const [filter, setFilter] = useState('');
  const [cursor, setCursor] = useState<string | null>(null);
  const path = `${kind.path}?limit=50${filter ? `&filter=${encodeURIComponent(filter)}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
  const { data, error, reload } = usePoll<Record<string, unknown> & { nextCursor: string | null }>(path, 3000);
  const [notice, setNotice] = useState<NoticeText | null>(null);
  const [fields, setFields] = useState<Record<string, string>>({});
  /** The entry whose Edit or Rotate form is open under its row. */
  const [open, setOpen] = useState<{ id: string; form: 'edit' | 'rotate' } | null>(null);
  const toggle = (id: string, form: 'edit' | 'rotate') => setOpen(open?.id === id && open.form === form ? null : { id, form });
  const tenants = (data?.[kind.listField] as T[] | undefined) ?? [];
  const url = (id: string, action = '') => `${kind.path}/${encodeURIComponent(id)}${action}`;

  const act = async (work: () => Promise<string | null | { text: string; copy: string }>) => {
    try {
      const text = await work();
      setNotice(text === null ? null : typeof text === 'string' ? { kind: 'ok', text } : { kind: 'ok', ...text });
    } catch (err) {
      setNotice({ kind: 'error', text: message(err) });
    }
    reload();
  };
  const create = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      const created = await api<Record<string, string>>(kind.path, { method: 'POST', body: Object.fromEntries(kind.createFields.map((f) => [f.field, fields[f.field] ?? ''])) });
      setFields({});
      const secret = created[kind.secretField] ?? '';
      return { text: `${kind.noun} ${kind.idOf(created as unknown as T)} created. Its ${kind.secretName} (shown once): ${secret}`, copy: secret };
    });
  };
  const rotate = (id: string, graceSeconds: number) => {
    void act(async () => {
      const r = await api<Record<string, string>>(url(id, '/rotate-secret'), { method: 'POST', body: { graceSeconds } });
      const secret = r[kind.secretField] ?? '';
      return { text: `New ${kind.secretName} of ${id} (shown once): ${secret}`, copy: secret };
    });
  };
  const remove = (id: string) => {
    if (!window.confirm(`Delete ${kind.lowerNoun} ${id}? ${kind.deleteWarning}`)) return;
    void act(async () => (await api(url(id), { method: 'DELETE' }), `${kind.noun} ${id} deleted.`));
  };
  const columnCount = kind.columns.length + 2;

  return (
    <div class="stack">
      <section class="card">
        <h2>{kind.title}</h2>
        <form class="inline-form" onSubmit={create} aria-label={`New ${kind.lowerNoun}`}>
          {kind.createFields.map((f) => (
            <input
              key={f.field}
              aria-label={f.label}
              placeholder={f.placeholder}
              value={fields[f.field] ?? ''}
              onInput={(e) => setFields({ ...fields, [f.field]: (e.target as HTMLInputElement).value })}
              required
            />
          ))}
          <button type="submit">{kind.createLabel}</button>
        </form>
        <Notice notice={notice} />
        <input
          aria-label={`Filter ${kind.plural}`}
          placeholder={kind.filterPlaceholder}
          value={filter}
          onInput={(e) => {
            setFilter((e.target as HTMLInputElement).value);
            setCursor(null);
          }}
        />
        {error && (
          <p class="error">
            Could not load the {kind.plural}: {error}
          </p>
        )}
        <div class="table-scroll">
          <table class="apps tenants">
            <thead>
              <tr>
                <th>{kind.noun}</th>
                {kind.columns.map((c) => (
                  <th key={c.header}>{c.header}</th>
                ))}
                <th>Actions</th>
              </tr>
            </thead>
            <tbody>
              {tenants.map((t) => {
                const id = kind.idOf(t);
                const form = open?.id === id && t.source === 'api' ? open.form : null;
                return (
                  <Fragment key={id}>
                    <tr {...{ [kind.rowAttribute]: id }}>
                      <td data-label={kind.noun}>
                        <Link href={kind.detailHref(id)}>{id}</Link>
                        {t.enabled === false && <span class="badge">disabled</span>}
                        {t.source === 'config' && <span class="badge">config file</span>}
                      </td>
                      {kind.columns.map((c) => (
                        <td key={c.header} class={c.class} data-label={c.header}>
                          {c.cell(t)}
                        </td>
                      ))}
                      <td data-label="Actions">
                        {t.source === 'api' ? (
                          <div class="actions">
                            {kind.editor && (
                              <button type="button" aria-expanded={form === 'edit'} onClick={() => toggle(id, 'edit')}>
                                Edit
                              </button>
                            )}
                            {kind.canDisable && (
                              <button type="button" onClick={() => void act(async () => (await api(url(id), { method: 'PATCH', body: { enabled: t.enabled === false } }), null))}>
                                {t.enabled === false ? 'Enable' : 'Disable'}
                              </button>
                            )}
                            <button type="button" aria-expanded={form === 'rotate'} onClick={() => toggle(id, 'rotate')}>
                              Rotate {kind.secretName}
                            </button>
                            <button type="button" class="danger" onClick={() => remove(id)}>
                              Delete
                            </button>
                          </div>
                        ) : (
                          <span class="hint">edit in the config file</span>
                        )}
                      </td>
                    </tr>
                    {form === 'edit' && kind.editor && (
                      <InPlace key={`${id} edit`} columns={columnCount}>
                        {kind.editor(t, (text) => void act(async () => text), () => setOpen(null))}
                      </InPlace>
                    )}
                    {form === 'rotate' && (
                      <InPlace key={`${id} rotate`} columns={columnCount}>
                        <RotateForm id={id} secretName={kind.secretName} onRotate={(grace) => rotate(id, grace)} onDone={() => setOpen(null)} />
                      </InPlace>
                    )}
                  </Fragment>
                );
              })}
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
    </div>
  );
}

/** Limits (empty = unlimited) and flags of one API-created app. */
function AppEditor(props: { app: TenantApp; onSaved: (text: string) => void; onDone: () => void }) {
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(LIMITS.map(({ field }) => [field, props.app[field] === null || props.app[field] === undefined ? '' : String(props.app[field])])),
  );
  const [flags, setFlags] = useState<Record<string, boolean>>(() => Object.fromEntries(FLAGS.map(({ field }) => [field, props.app[field] === true])));
  const [error, setError] = useState<string | null>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { ...flags };
    for (const { field } of LIMITS) body[field] = values[field] === '' ? null : Number(values[field]);
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
        {LIMITS.map(({ field, label }) => (
          <label key={field}>
            <span class="field-label">{label}</span>{' '}
            <FieldName name={field} />
            <input inputMode="numeric" placeholder="unlimited" value={values[field]} onInput={(e) => setValues({ ...values, [field]: (e.target as HTMLInputElement).value })} />
          </label>
        ))}
        {FLAGS.map(({ field, label }) => (
          <label key={field} class="check">
            <input type="checkbox" checked={flags[field]} onChange={(e) => setFlags({ ...flags, [field]: (e.target as HTMLInputElement).checked })} />
            <span class="field-label">{label}</span>{' '}
            <FieldName name={field} />
          </label>
        ))}
        <EditorActions onDone={props.onDone} error={error} />
      </form>
    </section>
  );
}

/**
 * Limits and credentials of one API-created push instance. Credentials are write-only: the
 * fields start empty (the list shows which platforms have some), and a platform whose fields
 * are left empty keeps what it has.
 */
function PushEditor(props: { instance: TenantPush; onSaved: (text: string) => void; onDone: () => void }) {
  const { instance } = props;
  const [rate, setRate] = useState(String(instance.maxPublishesPerSecond));
  const [quota, setQuota] = useState(instance.notificationQuota === null ? '' : String(instance.notificationQuota));
  const [fields, setFields] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const field = (name: string, label: string, multiline = false) => (
    <label key={name}>
      {label}
      {multiline ? (
        <textarea aria-label={label} rows={4} value={fields[name] ?? ''} onInput={(e) => setFields({ ...fields, [name]: (e.target as HTMLTextAreaElement).value })} />
      ) : (
        <input aria-label={label} value={fields[name] ?? ''} onInput={(e) => setFields({ ...fields, [name]: (e.target as HTMLInputElement).value })} />
      )}
    </label>
  );
  const given = (...names: string[]) => names.some((n) => (fields[n] ?? '').trim() !== '');
  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { maxPublishesPerSecond: Number(rate), notificationQuota: quota.trim() === '' ? null : Number(quota) };
    try {
      if (given('apnsTeamId', 'apnsKeyId', 'apnsPrivateKey')) {
        body.apns = { teamId: fields.apnsTeamId ?? '', keyId: fields.apnsKeyId ?? '', privateKey: fields.apnsPrivateKey ?? '' };
      }
      if (given('fcmServiceAccount')) body.fcm = { serviceAccount: fields.fcmServiceAccount };
      if (given('webPublic', 'webPrivate', 'webSubject')) {
        body.web = { vapidPublicKey: fields.webPublic ?? '', vapidPrivateKey: fields.webPrivate ?? '', subject: fields.webSubject ?? '' };
      }
      await api(`/push/${encodeURIComponent(instance.instanceId)}`, { method: 'PATCH', body });
      props.onSaved(`Instance ${instance.instanceId} saved.`);
      props.onDone();
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <section class="card" aria-label={`Edit ${instance.instanceId}`}>
      <h2 class="wrap">Edit {instance.instanceId}</h2>
      <form class="editor" onSubmit={save}>
        <label>
          <span class="field-label">Publishes per second</span>{' '}
          <FieldName name="maxPublishesPerSecond" />
          <input inputMode="numeric" value={rate} onInput={(e) => setRate((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          <span class="field-label">Notifications per month</span>{' '}
          <FieldName name="notificationQuota" />
          <input inputMode="numeric" placeholder="unlimited" value={quota} onInput={(e) => setQuota((e.target as HTMLInputElement).value)} />
        </label>
        <p class="hint">Credentials are write-only: leave a platform empty to keep what it has. Key material only (PEM text, the service-account JSON), no file paths.</p>
        <fieldset>
          <legend>APNs</legend>
          {field('apnsTeamId', 'APNs team id')}
          {field('apnsKeyId', 'APNs key id')}
          {field('apnsPrivateKey', 'APNs private key (.p8 PEM text)', true)}
        </fieldset>
        <fieldset>
          <legend>FCM</legend>
          {field('fcmServiceAccount', 'FCM service-account JSON', true)}
        </fieldset>
        <fieldset>
          <legend>Web push</legend>
          {field('webPublic', 'VAPID public key')}
          {field('webPrivate', 'VAPID private key')}
          {field('webSubject', 'VAPID subject (mailto: or https: URL)')}
        </fieldset>
        <EditorActions onDone={props.onDone} error={error} />
      </form>
    </section>
  );
}

/** An editor's Save and Cancel buttons and the error of its last save. */
function EditorActions(props: { onDone: () => void; error: string | null }) {
  return (
    <>
      <button type="submit">Save</button>
      <button type="button" class="ghost" onClick={props.onDone}>
        Cancel
      </button>
      {props.error && (
        <p class="error" role="alert">
          {props.error}
        </p>
      )}
    </>
  );
}
