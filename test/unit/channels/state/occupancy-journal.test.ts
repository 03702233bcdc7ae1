/**
 * The occupancy record on a real LMDB environment: what a worker writes is what the next one
 * reads back (grouped by channel, members included), and reading clears it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openShardDatabase } from '../../../../src/shards/storage.js';
import { OccupancyJournal } from '../../../../src/channels/state/occupancy-journal.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function open(dir: string) {
  const root = openShardDatabase(join(dir, 'shard-0'));
  return { root, journal: new OccupancyJournal(root) };
}

describe('OccupancyJournal', () => {
  it('gives the next worker the channels and members still recorded, then forgets them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-occupancy-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const first = open(dir);
    first.journal.occupied('app', 'presence-room');
    first.journal.memberAdded('app', 'presence-room', 'u1');
    first.journal.memberAdded('app', 'presence-room', '__proto__');
    first.journal.memberAdded('app', 'presence-room', 'u2');
    first.journal.memberRemoved('app', 'presence-room', 'u2');
    first.journal.occupied('app', 'news');
    first.journal.occupied('app', 'gone');
    first.journal.vacated('app', 'gone');
    first.journal.occupied('other-app', 'news');
    // A member whose channel record was never written still names its channel.
    first.journal.memberAdded('app', 'presence-orphan', 'u3');
    await first.root.flushed;
    await first.root.close();

    const second = open(dir);
    cleanups.push(() => second.root.close());
    const recorded = second.journal.takeAll();
    const byChannel = Object.fromEntries(recorded.map((r) => [`${r.appId}/${r.channel}`, [...r.members].sort()]));
    expect(byChannel).toEqual({
      'app/presence-room': ['__proto__', 'u1'],
      'app/news': [],
      'other-app/news': [],
      'app/presence-orphan': ['u3'],
    });
    await second.root.flushed;
    expect(second.journal.takeAll()).toEqual([]);
  });
});
