/**
 * Signed keep-alive HTTP triggers (C1 `POST /apps/<id>/events`, C2 `/batch_events`), signed
 * like the `pusher` SDK. Each event's data is `@<monotonic µs>@` plus padding, which the
 * load clients turn into a latency. Uses node:http with a keep-alive Agent holding
 * `connections` sockets; requests beyond that queue in the Agent (and their latency
 * includes the queueing, so a fixed-rate run does not hide a server that falls behind).
 */
import { Agent, request } from 'node:http';
import { stampUs } from './clock.js';
import { signedQuery } from './signing.js';

export interface BenchApp {
  id: string;
  key: string;
  secret: string;
}

/** The trigger outcome: HTTP status (0 when the request failed on the socket). */
export type TriggerStatus = number;

export class TriggerClient {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;
  private readonly padding: string;
  /** Requests sent and not yet answered. */
  inFlight = 0;
  /** Answers by status, cumulative. */
  readonly statuses = new Map<number, number>();
  firstError: string | undefined;

  constructor(baseUrl: string, private readonly app: BenchApp, connections: number, payloadBytes: number) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections, scheduling: 'fifo' });
    this.padding = 'x'.repeat(Math.max(0, payloadBytes - 18));
  }

  /** Event data carrying the send stamp. */
  data(): string {
    return `@${stampUs()}@${this.padding}`;
  }

  /** One event to one channel (C1). */
  trigger(channel: string, name = 'bench-event'): Promise<TriggerStatus> {
    return this.post(`/apps/${this.app.id}/events`, JSON.stringify({ name, channel, data: this.data() }));
  }

  /** One batch (C2): an event per channel. */
  triggerBatch(channels: readonly string[], name = 'bench-event'): Promise<TriggerStatus> {
    const data = this.data();
    return this.post(`/apps/${this.app.id}/batch_events`, JSON.stringify({ batch: channels.map((channel) => ({ name, channel, data })) }));
  }

  private post(path: string, body: string): Promise<TriggerStatus> {
    const query = signedQuery('POST', path, body, this.app.key, this.app.secret, Math.floor(Date.now() / 1000));
    this.inFlight++;
    return new Promise<TriggerStatus>((resolve) => {
      const done = (status: number, error?: string): void => {
        this.inFlight--;
        this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
        if (error && !this.firstError) this.firstError = error;
        resolve(status);
      };
      const req = request(
        {
          host: this.host,
          port: this.port,
          method: 'POST',
          path: `${path}?${query}`,
          agent: this.agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const status = res.statusCode ?? 0;
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (status !== 200) text += chunk;
          });
          res.on('end', () => done(status, status === 200 ? undefined : `${status} ${text.slice(0, 300)}`));
          res.on('error', (err) => done(0, String(err)));
        },
      );
      req.on('error', (err) => done(0, String(err)));
      req.end(body);
    });
  }

  /** Answers with status 200 so far. */
  get ok(): number {
    return this.statuses.get(200) ?? 0;
  }

  /** Answers other than 200 so far (including socket failures). */
  get failed(): number {
    let n = 0;
    for (const [status, count] of this.statuses) if (status !== 200) n += count;
    return n;
  }

  close(): void {
    this.agent.destroy();
  }
}
