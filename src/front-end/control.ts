/**
 * The control link between the main thread and one front-end thread: requests with an answer
 * (`ask`) and notices without one (`tell`), both ways, over the thread's port (the Worker on
 * main, `parentPort` in the thread). Messages are structured clones; a request's answer comes
 * back with its id, or its error's message.
 */
import type { TransferListItem } from 'node:worker_threads';
import { HeraldError } from '../errors.js';

/** The part of a MessagePort or Worker the link uses. */
export interface ControlPort {
  postMessage(message: unknown, transfer?: readonly TransferListItem[]): void;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

type Wire =
  | { control: 'ask'; id: number; type: string; body: unknown }
  | { control: 'answer'; id: number; ok: true; body: unknown }
  | { control: 'answer'; id: number; ok: false; error: string }
  | { control: 'tell'; type: string; body: unknown };

export type ControlHandler = (body: never, transfer: (list: readonly TransferListItem[]) => void) => unknown;

export class ControlLink {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private readonly handlers = new Map<string, ControlHandler>();
  private closed = false;

  constructor(private readonly port: ControlPort, private readonly timeoutMs = 10_000) {
    port.on('message', (message) => this.receive(message as Wire));
  }

  /** Answers requests and notices of `type` (a request's answer is the handler's value, awaited). */
  on<T>(type: string, handler: (body: T) => unknown): void {
    this.handlers.set(type, handler as ControlHandler);
  }

  ask<R>(type: string, body: unknown = null, transfer: readonly TransferListItem[] = [], timeoutMs = this.timeoutMs): Promise<R> {
    if (this.closed) return Promise.reject(new HeraldError('NOT_READY', 'front-end thread link closed'));
    const id = this.nextId++;
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new HeraldError('NOT_READY', `front-end thread did not answer ${type} within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      const wire: Wire = { control: 'ask', id, type, body };
      this.port.postMessage(wire, transfer);
    });
  }

  tell(type: string, body: unknown = null, transfer: readonly TransferListItem[] = []): void {
    if (this.closed) return;
    const wire: Wire = { control: 'tell', type, body };
    this.port.postMessage(wire, transfer);
  }

  /** Every request still waiting fails with `reason` (the other side is gone). */
  close(reason: string): void {
    this.closed = true;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new HeraldError('NOT_READY', reason));
      this.pending.delete(id);
    }
  }

  private receive(wire: Wire): void {
    if (typeof wire !== 'object' || wire === null || !('control' in wire)) return;
    if (wire.control === 'answer') {
      const p = this.pending.get(wire.id);
      if (!p) return;
      this.pending.delete(wire.id);
      clearTimeout(p.timer);
      if (wire.ok) p.resolve(wire.body);
      else p.reject(new Error(wire.error));
      return;
    }
    const handler = this.handlers.get(wire.type);
    if (wire.control === 'tell') {
      handler?.(wire.body as never, () => {});
      return;
    }
    const id = wire.id;
    let transfer: readonly TransferListItem[] = [];
    Promise.resolve()
      .then(() => {
        if (!handler) throw new Error(`no handler for ${wire.type}`);
        return handler(wire.body as never, (list) => (transfer = list));
      })
      .then(
        (body) => this.port.postMessage({ control: 'answer', id, ok: true, body } satisfies Wire, transfer),
        (err: unknown) => this.port.postMessage({ control: 'answer', id, ok: false, error: err instanceof Error ? err.message : String(err) } satisfies Wire),
      );
  }
}
