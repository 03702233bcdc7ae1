/**
 * The history events the front end hands to the shards, gathered per shard over one event-loop
 * turn and sent as one `channels.historyAppends` message (a message costs the main thread more
 * than the event in it). Batches leave in order and the shard takes their events in order, so
 * the answers keep each channel's serial order. A batch that fails (the shard timed out or
 * crashed) fails each of its events; an event the shard refused fails alone.
 */
import { ERROR_CATALOGUE, HeraldError, type ErrorCode } from '../../errors.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { ChannelShardApi, HistoryAppend } from '../messages.js';

interface Pending {
  append: HistoryAppend;
  resolve: (serial: string | null) => void;
  reject: (err: unknown) => void;
}

export class HistoryAppends {
  private readonly pending = new Map<number, Pending[]>();
  private scheduled = false;

  constructor(private readonly shards: ShardRequester<ChannelShardApi>) {}

  /** Resolves with the event's serial (null: its app keeps no history for the channel now) once committed. */
  append(shard: number, append: HistoryAppend): Promise<string | null> {
    return new Promise((resolve, reject) => {
      let list = this.pending.get(shard);
      if (!list) this.pending.set(shard, (list = []));
      list.push({ append, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    for (const [shard, list] of this.pending) {
      this.pending.delete(shard);
      this.shards.request(shard, { type: 'channels.historyAppends', appends: list.map((p) => p.append) }).then(
        ({ results }) => {
          list.forEach((p, i) => {
            const r = results[i];
            if (r?.ok) p.resolve(r.serial);
            else p.reject(r ? new HeraldError(knownCode(r.code), r.message) : new HeraldError('INTERNAL'));
          });
        },
        (err: unknown) => {
          for (const p of list) p.reject(err);
        },
      );
    }
  }
}

function knownCode(code: string): ErrorCode {
  return code in ERROR_CATALOGUE ? (code as ErrorCode) : 'INTERNAL';
}
