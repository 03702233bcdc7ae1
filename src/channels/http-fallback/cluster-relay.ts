/**
 * Cluster mode: the requests for a session that reach another node than the one holding it
 * (a load balancer without sticky sessions), over the directory's relay messages (directory.ts):
 * - an xhr_send's messages go to the session's node (`send`), which injects them; one over the
 *   body cap is not read: the session's node closes the session with 1009 (`tooLarge`);
 * - a poll is relayed (`poll`): the session's node makes it the session's receiver and answers
 *   it with `lines` (its flush, or a heartbeat); a session that is no longer there answers `gone`,
 *   and the poll is served here instead (`local`: a new session). A relayed poll with no answer
 *   within heartbeatMs + RELAY_GRACE_MS is answered with a heartbeat here.
 * Streams are never relayed: a stream for a session held elsewhere opens one here (routes.ts).
 */
import type { HttpResponse } from 'uWebSockets.js';
import { CLOSE_CODES } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import { errorFrame } from '../frames.js';
import type { FallbackRelay, SessionDirectory } from './directory.js';
import { answerPoll } from './responses.js';
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


export class ClusterRelay {
  /** Polls relayed to the node holding their session, by poll id, until its answer comes back. */
  private readonly remotePolls = new Map<string, RelayedPoll>();
  private pollSequence = 0;

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
        session.cork(() => {
          session.send(errorFrame(null, m.message));
          session.end(CLOSE_CODES.MESSAGE_TOO_BIG, 'Message too big');
        });
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
}
