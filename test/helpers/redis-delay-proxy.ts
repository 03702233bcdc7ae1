/**
 * A TCP proxy in front of a redis-server that can hold back SUBSCRIBE commands: each chunk a
 * client sends that holds one waits `subscribeDelayMs` before it is passed on, and whatever
 * the client sends after it waits behind it (a connection's commands stay in order). Replies
 * pass at once. Models a node whose subscriber connection is slow (a loaded machine, a far
 * Redis) without touching the node.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { sleep } from './wait.js';

/** RESP of a SUBSCRIBE (not UNSUBSCRIBE, not PSUBSCRIBE): the command name is a bulk string of its own. */
const SUBSCRIBE = /\r\nsubscribe\r\n/i;

export class RedisDelayProxy {
  /** How long a chunk holding a SUBSCRIBE is held; 0 passes everything at once. */
  subscribeDelayMs = 0;
  /** SUBSCRIBE chunks held so far. */
  held = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly upstreamPort: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  private pipe(client: Socket): void {
    const upstream = connect(this.upstreamPort, '127.0.0.1');
    this.sockets.add(client).add(upstream);
    let queue = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      const holdMs = this.subscribeDelayMs > 0 && SUBSCRIBE.test(chunk.toString('latin1')) ? this.subscribeDelayMs : 0;
      if (holdMs > 0) this.held++;
      // time: the hold is what this proxy is for.
      queue = queue.then(() => (holdMs > 0 ? sleep(holdMs) : undefined)).then(() => {
        if (!upstream.destroyed) upstream.write(chunk);
      });
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', close).on('error', close);
    upstream.on('close', close).on('error', close);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
