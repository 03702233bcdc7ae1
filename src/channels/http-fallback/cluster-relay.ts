/**
 * Cluster mode: the requests for a session that reach another node than the one holding it
 * (a load balancer without sticky sessions), over the directory's relay messages (directory.ts):
 * - an xhr_send's messages go to the session's node (`send`), which injects them; one over the
 *   body cap is not read: the session's node closes the session with 1009 (`tooLarge`);
 * - a poll is relayed (`poll`): the session's node makes it the session's receiver and answers
 *   it with `lines` (its flush, or a heartbeat); a session that is no longer there answers `gone`,
 *   and the poll is served here instead (`local`: a new session). A relayed poll with no answer
 *   within heartbeatMs + RELAY_GRACE_MS is answered with a heartbeat here.
 * - a stream, where the directory relaysStreams (front-end threads), is relayed too
 *   (`streamOpen`): the session's node makes a remote receiver of it and sends it the session's
 *   lines (`streamLines`, heartbeats included) until it lets it go (`streamEnd`); the node
 *   receiving the request writes them on its response, opened by the first of them (`h`). The
 *   client going away (`streamAborted`) and its connection holding unsent lines
 *   (`streamBlocked`) are told to the session's node. A session no longer there answers
 *   `streamGone` and the stream is served here (`local`). A cluster's nodes do not relay streams:
 *   a stream for a session held elsewhere opens one here (routes.ts).
 */
import type { HttpResponse } from 'uWebSockets.js';
import { describeError as describe, log } from '../../log.js';
import type { FallbackRelay, SessionDirectory } from './directory.js';
import { answerPoll, startStream } from './responses.js';
import type { Receiver, SessionSocket } from './session.js';
import type { SessionTable } from './session-table.js';

/** How long past the heartbeat a relayed poll waits for its answer before answering a heartbeat itself. */
const RELAY_GRACE_MS = 5000;

/** A poll waiting for the answer of the node holding its session. */
interface RelayedPoll {
  readonly res: HttpResponse;
  readonly aborted: () => boolean;
  /** The session was not there after all: served here (a new session). */
  readonly local: () => void;
  readonly timer: NodeJS.Timeout;
}

/** A stream relayed to the node holding its session: its response here, written with the lines that node sends. */
interface RelayedStream {
  readonly res: HttpResponse;
  readonly id: string;
  readonly owner: string;
  /** The response's head and first line are written (by the first lines that came back). */
  started: boolean;
  /** The session was not there after all: served here (a new session). */
  readonly local: () => void;
  /** Until the first lines come back: past it, the stream ends with a heartbeat. */
  timer: NodeJS.Timeout | null;
}

/** A stream of another node that is the receiver of a session held here. */
interface RemoteStream {
  readonly session: SessionSocket;
  readonly receiver: Receiver;
}

export class ClusterRelay {
  /** Polls relayed to the node holding their session, by poll id, until its answer comes back. */
  private readonly remotePolls = new Map<string, RelayedPoll>();
  private pollSequence = 0;
  /** Streams served here for sessions held elsewhere, by stream id, until either side ends them. */
  private readonly relayedStreams = new Map<string, RelayedStream>();
  /** Streams of other nodes receiving sessions held here, by stream id, until let go or aborted. */
  private readonly remoteStreams = new Map<string, RemoteStream>();

  constructor(
    readonly directory: SessionDirectory,
    private readonly table: SessionTable,
    private readonly heartbeatMs: number,
  ) {
    directory.onMessage((message, origin) => {
      try {
        this.relayed(message as FallbackRelay, origin);
      } catch (err) {
        log.error('http fallback: relayed request failed', { error: describe(err) });
      }
    });
  }

  /** A poll for a session `owner` holds: relayed there, its answer relayed back to `res`; `local` serves it here if the session is gone. */
  relayPoll(res: HttpResponse, id: string, owner: string, aborted: () => boolean, local: () => void): void {
    const pollId = `${this.directory.nodeId}:${++this.pollSequence}`;
    const pending: RelayedPoll = {
      res,
      aborted,
      local,
      timer: setTimeout(() => {
        this.remotePolls.delete(pollId);
        if (!aborted()) answerPoll(res, 'h\n');
      }, this.heartbeatMs + RELAY_GRACE_MS),
    };
    this.remotePolls.set(pollId, pending);
    this.directory.send(owner, { op: 'poll', id, pollId });
  }

  /**
   * A stream for a session `owner` holds (directory.relaysStreams): relayed there, the session's
   * lines written to `res` as they come back; `local` serves it here if the session is gone.
   * Answers what the caller runs when the client aborts.
   */
  relayStream(res: HttpResponse, id: string, owner: string, local: () => void): () => void {
    const streamId = `${this.directory.nodeId}:${++this.pollSequence}`;
    const pending: RelayedStream = {
      res,
      id,
      owner,
      started: false,
      local,
      timer: setTimeout(() => {
        this.relayedStreams.delete(streamId);
        answerPoll(res, 'h\n');
      }, this.heartbeatMs + RELAY_GRACE_MS),
    };
    this.relayedStreams.set(streamId, pending);
    res.onWritable(() => {
      if (this.relayedStreams.get(streamId) === pending) this.directory.send(owner, { op: 'streamBlocked', id, streamId, blocked: false });
      return true;
    });
    this.directory.send(owner, { op: 'streamOpen', id, streamId });
    return () => {
      if (this.relayedStreams.get(streamId) !== pending) return;
      this.relayedStreams.delete(streamId);
      if (pending.timer) clearTimeout(pending.timer);
      this.directory.send(owner, { op: 'streamAborted', id, streamId });
    };
  }

  /** An xhr_send's messages for a session `owner` holds. */
  relaySend(owner: string, id: string, messages: string[]): void {
    this.directory.send(owner, { op: 'send', id, messages });
  }

  /** An xhr_send over the body cap for a session `owner` holds: closed there with 1009 and the pusher:error `message`. */
  relayTooLarge(owner: string, id: string, message: string): void {
    this.directory.send(owner, { op: 'tooLarge', id, message });
  }

  /** Stops the relayed polls' timers (shutdown). */
  close(): void {
    for (const pending of this.remotePolls.values()) clearTimeout(pending.timer);
    this.remotePolls.clear();
    for (const pending of this.relayedStreams.values()) if (pending.timer) clearTimeout(pending.timer);
    this.relayedStreams.clear();
    this.remoteStreams.clear();
  }

  /** Relay messages from the other nodes of the cluster. */
  private relayed(m: FallbackRelay, origin: string): void {
    const table = this.table;
    const now = Date.now();
    switch (m.op) {
      case 'send': {
        const session = table.get(m.id);
        if (!session || session.ended) return;
        table.renew(session, now);
        table.inject(session, m.messages);
        return;
      }
      case 'tooLarge': {
        const session = table.get(m.id);
        if (!session || session.ended) return;
        session.endTooLarge(m.message);
        return;
      }
      case 'poll': {
        const session = table.get(m.id);
        if (!session) {
          this.directory.send(origin, { op: 'gone', pollId: m.pollId });
          return;
        }
        const pollId = m.pollId;
        table.receive(
          session,
          {
            stream: false,
            blocked: false,
            lastWriteMs: now,
            openedMs: now,
            write: () => true,
            finish: (lines) => this.directory.send(origin, { op: 'lines', pollId, body: lines }),
          },
          now,
        );
        table.renew(session, now);
        if (session.pending) table.flush(session, now);
        return;
      }
      case 'streamOpen': {
        const session = table.get(m.id);
        if (!session || session.ended) {
          this.directory.send(origin, { op: 'streamGone', streamId: m.streamId });
          return;
        }
        this.openRemoteStream(session, origin, m.streamId, now);
        return;
      }
      case 'streamAborted':
      case 'streamBlocked': {
        const remote = this.remoteStreams.get(m.streamId);
        if (!remote) return;
        const { session, receiver } = remote;
        if (m.op === 'streamAborted') {
          this.remoteStreams.delete(m.streamId);
          if (session.receiver === receiver) table.release(session, now);
          return;
        }
        receiver.blocked = m.blocked;
        if (!m.blocked) table.schedule(session);
        return;
      }
      case 'streamLines':
      case 'streamEnd':
      case 'streamGone': {
        const pending = this.relayedStreams.get(m.streamId);
        if (!pending) return;
        if (pending.timer) {
          clearTimeout(pending.timer);
          pending.timer = null;
        }
        if (m.op === 'streamGone') {
          this.relayedStreams.delete(m.streamId);
          pending.local();
          return;
        }
        this.writeRelayed(pending, m.streamId, m.lines, m.op === 'streamEnd');
        return;
      }
      case 'lines':
      case 'gone': {
        const pending = this.remotePolls.get(m.pollId);
        if (!pending) return;
        this.remotePolls.delete(m.pollId);
        clearTimeout(pending.timer);
        if (pending.aborted()) return;
        if (m.op === 'lines') answerPoll(pending.res, m.body);
        else pending.local();
        return;
      }
    }
  }

  /** A stream of node `origin` becomes the receiver of `session` here: what it is sent goes there. */
  private openRemoteStream(session: SessionSocket, origin: string, streamId: string, now: number): void {
    const table = this.table;
    const send = (message: FallbackRelay): void => this.directory.send(origin, message);
    const receiver: Receiver = {
      stream: true,
      blocked: false,
      lastWriteMs: now,
      openedMs: now,
      write: (lines) => {
        send({ op: 'streamLines', streamId, lines });
        return true;
      },
      finish: (lines) => {
        this.remoteStreams.delete(streamId);
        send({ op: 'streamEnd', streamId, lines });
      },
    };
    this.remoteStreams.set(streamId, { session, receiver });
    table.receive(session, receiver, now);
    table.renew(session, now);
    // What a stream opened here starts with for a session that exists: a heartbeat.
    receiver.write('h\n');
    if (session.pending) table.schedule(session);
  }

  /** Lines the session's node sent for a stream served here: the first open the response; `end`: its last. */
  private writeRelayed(pending: RelayedStream, streamId: string, lines: string, end: boolean): void {
    const res = pending.res;
    if (end) {
      this.relayedStreams.delete(streamId);
      if (pending.started) res.cork(() => res.end(lines));
      else answerPoll(res, lines);
      return;
    }
    let ok = true;
    if (!pending.started) {
      pending.started = true;
      startStream(res, lines);
    } else {
      res.cork(() => {
        ok = res.write(lines);
      });
    }
    if (!ok) this.directory.send(pending.owner, { op: 'streamBlocked', id: pending.id, streamId, blocked: true });
  }
}
