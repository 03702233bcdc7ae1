/**
 * A TCP proxy on loopback in front of a Herald node that can cut its clients off: `cut()`
 * destroys every connection it carries and holds new ones unanswered (what they send waits,
 * nothing reaches the node), as a network that went away does; `restore()` passes the held
 * connections on and lets the next ones through. Bytes pass as they are (WebSocket, HTTP
 * fallback alike). `upstreamPort` may change while cut: connections carried from then on go
 * to the new port (a client that drops from one node and comes back through another).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class DroppingProxy {
  port = 0;
  /** Connections that arrived while cut. */
  held = 0;
  private readonly waiting: Socket[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private isCut = false;

  constructor(public upstreamPort: number) {}

  async start(): Promise<this> {
    this.server = createServer((client) => this.carry(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  /** Drops every carried connection and refuses new ones until restore(). */
  cut(): void {
    this.isCut = true;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  restore(): void {
    this.isCut = false;
    for (const client of this.waiting.splice(0)) if (!client.destroyed) this.carry(client);
  }

  async close(): Promise<void> {
    this.cut();
    for (const client of this.waiting.splice(0)) client.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private carry(client: Socket): void {
    if (this.isCut) {
      this.held++;
      client.on('error', () => undefined);
      client.pause();
      this.waiting.push(client);
      return;
    }
    const upstream = connect(this.upstreamPort, '127.0.0.1');
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      this.sockets.add(a);
      a.on('error', () => undefined);
      a.on('close', () => {
        this.sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  }
}
