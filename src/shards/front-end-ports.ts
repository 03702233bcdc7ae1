/**
 * Worker side of the front ends' ports (runs in a shard worker): each attached front end talks
 * to this shard over its own MessagePort, and every envelope on it is answered by the same
 * `answer` as a Piscina task (codec, deadline, handlers), the reply tagged with the envelope's id.
 *
 * Restore order: a worker that replaced one that died is told which front ends held state in
 * it (`awaitRestoreOf`). Until each of them has sent `core.restored`, a front end's requests
 * after its own `core.restored` are held, in arrival order, so every front end's restore runs
 * before any front end's other requests. A front end that detaches or whose port closes no
 * longer holds the others, and none holds them longer than `restoreHoldMs` (the shard request
 * timeout): past it, the held requests run and the front ends still awaited are logged. A held
 * request keeps its deadline: held past it, it is refused.
 */
import type { MessagePort } from 'node:worker_threads';
import { log } from '../log.js';
import type { ShardCodec } from './codec.js';
import type { ShardEnvelope, ShardPortReply, ShardReply } from './messages.js';

type Answer = (envelope: ShardEnvelope) => Promise<ShardReply>;

interface AttachedPort {
  port: MessagePort;
  /** Its restore phase: what it sends up to its `core.restored` runs at once. */
  restoring: boolean;
}

export class FrontEndPorts {
  private readonly attached = new Map<number, AttachedPort>();
  /** Front ends whose `core.restored` is still awaited. */
  private readonly awaited = new Set<number>();
  /** The restore list was taken (it comes with every re-attach; the first one counts). */
  private awaitListTaken = false;
  /** Requests held until `awaited` is empty, in arrival order. */
  private held: (() => void)[] = [];
  private holdTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly codec: ShardCodec,
    private readonly answer: Answer,
    private readonly shardIndex: number,
    private readonly restoreHoldMs: number,
  ) {}

  attach(frontEnd: number, port: MessagePort, awaitRestoreOf: readonly number[] | undefined): void {
    if (awaitRestoreOf && !this.awaitListTaken) {
      this.awaitListTaken = true;
      for (const id of awaitRestoreOf) this.awaited.add(id);
      if (this.awaited.size > 0) {
        this.holdTimer = setTimeout(() => this.endHold(), this.restoreHoldMs);
        this.holdTimer.unref();
      }
    }
    this.attached.get(frontEnd)?.port.close();
    const entry: AttachedPort = { port, restoring: this.awaited.has(frontEnd) };
    this.attached.set(frontEnd, entry);
    port.on('message', (bytes: Uint8Array) => this.receive(frontEnd, entry, bytes));
    port.on('close', () => {
      if (this.attached.get(frontEnd) !== entry) return;
      this.attached.delete(frontEnd);
      this.restoredBy(frontEnd);
    });
  }

  /** Closes the front end's port; false if it had none. */
  detach(frontEnd: number): boolean {
    const entry = this.attached.get(frontEnd);
    if (!entry) return false;
    this.attached.delete(frontEnd);
    // Told before the close: the front end refuses its requests to this shard at once instead of
    // waiting for a new port that will not come.
    entry.port.postMessage(this.codec.encode({ notice: { type: 'core.detached' } }));
    entry.port.close();
    this.restoredBy(frontEnd);
    return true;
  }

  private receive(frontEnd: number, entry: AttachedPort, bytes: Uint8Array): void {
    let envelope: ShardEnvelope;
    try {
      envelope = this.codec.decode(bytes) as ShardEnvelope;
    } catch (err) {
      log.error('shard port message undecodable', { shard: this.shardIndex, frontEnd, error: String(err) });
      return;
    }
    const run = (): void => void this.reply(entry.port, envelope);
    if (entry.restoring) {
      if (envelope.request.type === 'core.restored') {
        entry.restoring = false;
        run();
        this.restoredBy(frontEnd);
        return;
      }
      run();
    } else if (this.awaited.size > 0) {
      this.held.push(run);
    } else {
      run();
    }
  }

  private async reply(port: MessagePort, envelope: ShardEnvelope): Promise<void> {
    const reply: ShardPortReply = { ...(await this.answer(envelope)), id: envelope.id };
    const encoded = this.codec.encode(reply);
    // A port closed meanwhile (its front end went away) drops the reply: nobody waits for it.
    port.postMessage(encoded, [encoded.buffer]);
  }

  /** Whether any front end is attached. */
  get any(): boolean {
    return this.attached.size > 0;
  }

  /** Posts a notice (not an answer: no id) to every attached front end, encoded once. */
  broadcast(notice: unknown): void {
    const encoded = this.codec.encode({ notice });
    for (const { port } of this.attached.values()) port.postMessage(encoded);
  }

  /** The front end no longer holds the others back; the last one releases the held requests. */
  private restoredBy(frontEnd: number): void {
    if (!this.awaited.delete(frontEnd) || this.awaited.size > 0) return;
    this.release();
  }

  /** The hold's bound passed: the front ends not restored yet no longer hold the others. */
  private endHold(): void {
    if (this.awaited.size === 0) return;
    log.warn('front ends did not restore their subscriptions on the new shard worker in time: running the other requests', {
      shard: this.shardIndex,
      frontEnds: [...this.awaited],
      heldRequests: this.held.length,
      restoreHoldMs: this.restoreHoldMs,
    });
    this.awaited.clear();
    this.release();
  }

  private release(): void {
    clearTimeout(this.holdTimer);
    const held = this.held;
    this.held = [];
    for (const run of held) run();
  }
}
