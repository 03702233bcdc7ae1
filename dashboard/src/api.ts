/**
 * The admin API as the page uses it: the token (kept for the tab in sessionStorage), JSON
 * requests with `Authorization: Bearer`, and the live stream (server-sent events read with
 * fetch, because EventSource cannot send the header).
 */

const TOKEN_KEY = 'herald-admin-token';

export function storedToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** A failed admin request: the status and the server's description. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** Called when the server refuses the token (the page goes back to the sign-in form). */
let onUnauthorized: () => void = () => undefined;
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

export async function api<T>(path: string, init: { method?: string; body?: unknown; token?: string } = {}): Promise<T> {
  const token = init.token ?? storedToken() ?? '';
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const message = (body as { error?: string } | null)?.error ?? `HTTP ${res.status}`;
    const retry = Number(res.headers.get('retry-after'));
    if (res.status === 401 && init.token === undefined) onUnauthorized();
    throw new ApiError(res.status, message, Number.isFinite(retry) && retry > 0 ? retry : undefined);
  }
  return body as T;
}

export interface StreamHandlers {
  onEvent(type: string, data: unknown): void;
  onState?(connected: boolean): void;
}

/**
 * Opens `/admin/v1/stream` (with `?app=` to watch an app's debug console) and hands each event
 * to the handlers; reconnects after a failure. Returns the function that closes it.
 */
export function openStream(appId: string | null, handlers: StreamHandlers): () => void {
  let closed = false;
  let controller: AbortController | undefined;
  let retry: number | undefined;
  const connect = async (): Promise<void> => {
    controller = new AbortController();
    try {
      const res = await fetch(`/admin/v1/stream${appId === null ? '' : `?app=${encodeURIComponent(appId)}`}`, {
        headers: { authorization: `Bearer ${storedToken() ?? ''}` },
        signal: controller.signal,
      });
      if (res.status === 401) {
        onUnauthorized();
        return;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      handlers.onState?.(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let type = 'message';
          let data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) type = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (data) handlers.onEvent(type, JSON.parse(data));
        }
      }
    } catch {
      // Closed by us, or the connection failed: retried below unless closed.
    }
    handlers.onState?.(false);
    if (!closed) retry = window.setTimeout(() => void connect(), 2000);
  };
  void connect();
  return () => {
    closed = true;
    window.clearTimeout(retry);
    controller?.abort();
  };
}

/** Shapes of the admin API answers (docs/admin-api.md). */
export interface Overview {
  node: {
    startedAt: string;
    uptimeSeconds: number;
    connections: number;
    messages: number;
    /** null when the counts could not be read (a cluster without Redis). */
    occupiedChannels: number | null;
    shards: { shard: number; up: boolean; uptimeMs: number; queueDepth: number }[];
  };
  /** The threads serving the port and this node's connections on each, by thread index. */
  frontEnd: FrontEndFigures;
  /** null on a single node. */
  cluster: ClusterOverview | null;
  webhooks: { pending: number; inFlight: number; sent: number; failedAttempts: number; deadLettered: number } | null;
  push: { notificationsThisMonth: number };
  /** One page of the apps in id order (`limit`, `cursor`), their total, and the cursor of the next page (null on the last). */
  apps: AppSummary[];
  appsTotal: number;
  appsNextCursor: string | null;
  /** The same for the push instances (`pushLimit`, `pushCursor`). */
  pushInstances: PushSummary[];
  pushInstancesTotal: number;
  pushInstancesNextCursor: string | null;
}

export interface FrontEndFigures {
  threads: number;
  connections: number[];
}

export interface ClusterOverview {
  nodeId: string;
  redis: string;
  keyPrefix: string;
  nodeTimeoutMs: number;
  available: boolean;
  relayFailures: number;
  watchedChannels: number;
  /** null while Redis cannot be read. */
  nodes: { nodeId: string; session: string; self: boolean; expiresInMs: number }[] | null;
  reaping: number | null;
}

export interface AppSummary {
  id: string;
  key: string;
  secret: string;
  enabled: boolean;
  connections: number;
  occupiedChannels?: number | null;
  watched: boolean;
}

export interface PushSummary {
  instanceId: string;
  secretKey: string;
  gateways: string[];
  notificationsThisMonth?: number | null;
}

export interface AppView {
  app: AppSummary;
  occupiedChannels: number;
  channels: { name: string; subscriptionCount?: number | null; userCount?: number }[];
  channelsTruncated: boolean;
}

/** A kept event as the channel page gets it: `data` cut to a preview when `dataTruncated`. */
export interface KeptEventView {
  serial: string;
  event: string;
  publishedAt: string;
  data: string;
  dataBytes: number;
  dataTruncated: boolean;
  userId?: string;
}

export interface ChannelView {
  channel: string;
  occupied: boolean;
  subscriptionCount?: number;
  userCount?: number;
  /** The app's `apps[].history.channels`, null when it keeps no history. */
  historyChannels: string[] | null;
  /** null when the channel keeps no history. */
  history: { maxEvents: number; ttlSeconds: number; complete: boolean; events: KeptEventView[] } | null;
}

export interface GatewayCounts {
  recipients: number;
  sent: number;
  failed: number;
  removed: number;
  /** Failures by reason (at most 20 reasons, the rest under `other`). */
  errors?: Record<string, number>;
}

export interface PushView {
  instance: PushSummary;
  devices: { apns: number; fcm: number; web: number; total: number };
  publishes: {
    publishId: string;
    kind: string;
    targets: string[];
    acceptedAt: string;
    state: string;
    recipients: number;
    gateways: Record<string, GatewayCounts>;
    delivered: number;
    opened: number;
  }[];
}

export interface Stats {
  t: number;
  connections: number;
  appConnections?: number;
  messages: number;
  dropped: number;
}
