/**
 * AvailabilityWait: waiters resolve true once the condition holds, false at their own deadline
 * or when closed, and nothing keeps polling once none waits.
 */
import { describe, expect, it } from 'vitest';
import { AvailabilityWait } from '../../../../../src/channels/adapter/redis/availability-wait.js';
import { sleep, until } from '../../../../helpers/wait.js';

describe('AvailabilityWait', () => {
  it('answers at once when available or past the deadline, else when it becomes available', async () => {
    let available = true;
    let checks = 0;
    const gate = new AvailabilityWait(() => {
      checks++;
      return available;
    });
    expect(await gate.until(Date.now() + 60_000)).toBe(true);
    available = false;
    expect(await gate.until(Date.now() - 1)).toBe(false);
    const outcomes: boolean[] = [];
    const waiting = [gate.until(Date.now() + 60_000), gate.until(Date.now() + 60_000)].map((p) => p.then((v) => outcomes.push(v)));
    await until(() => checks > 5, 'a few polls while unavailable');
    expect(outcomes).toEqual([]);
    available = true;
    await Promise.all(waiting);
    expect(outcomes).toEqual([true, true]);
    // Nobody waits: no more polls.
    const polled = checks;
    available = false;
    expect(await gate.until(Date.now() + 120)).toBe(false);
    const afterDeadline = checks;
    expect(afterDeadline).toBeGreaterThan(polled);
    // time: a few poll periods pass with nobody waiting.
    await sleep(200);
    expect(checks).toBe(afterDeadline);
  });

  it('gives every waiter false on close, and answers later calls false at once', async () => {
    const gate = new AvailabilityWait(() => false);
    const pending = gate.until(Date.now() + 60_000);
    gate.close();
    expect(await pending).toBe(false);
    expect(await gate.until(Date.now() + 60_000)).toBe(false);
  });
});
