/**
 * CPU time of the calling thread from /proc/thread-self/stat (Linux only; 0 elsewhere), so a
 * worker thread can report its own share: process.cpuUsage() counts every thread of the process
 * and Node 20 has no process.threadCpuUsage(). Clock-tick resolution (10 ms at CLK_TCK 100):
 * read it over phases of a second or more.
 */
import { readFileSync } from 'node:fs';

/** Assumed clock ticks per second (CLK_TCK is 100 on every Linux Herald runs on). */
const TICKS_PER_SECOND = 100;

/** User + system CPU of the calling thread so far, µs. */
export function threadCpuUs(): number {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    // Fields after the command name, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after "pid (comm) ".
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1e6) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** User + system CPU of the whole process so far, µs. */
export function processCpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}
