/**
 * Where log lines go during a test run: into files under `<tmpdir>/herald-test-logs/`, not into
 * vitest's report. Spawned servers (HeraldProcess) register their log file; JSON log lines that
 * in-process code (shard pools, the outbox in unit tests) writes to this process's stderr are
 * diverted to a file per test file. When a test fails, the setup file (test/setup/logs.ts)
 * prints the tail of each log written during it, with the file's path.
 */
import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

export const TEST_LOG_DIR = join(tmpdir(), 'herald-test-logs');
/** Lines of each log shown under a failed test. */
const TAIL_LINES = 60;

interface LogFile {
  path: string;
  label: string;
  /** Shown under a failed test: kept after unregister, for a look at the whole file. */
  shown: boolean;
}

const live = new Set<LogFile>();
let sequence = 0;

/**
 * A new log file for `label` (a spawned server): written by the caller, shown when a test fails
 * while it is registered, deleted at unregister unless it was shown.
 */
export function registerLogFile(label: string): { path: string; append(text: string): void; unregister(): void } {
  mkdirSync(TEST_LOG_DIR, { recursive: true });
  const path = join(TEST_LOG_DIR, `${label}-${process.pid}-${++sequence}.log`);
  const entry: LogFile = { path, label, shown: false };
  live.add(entry);
  return {
    path,
    append: (text) => appendFileSync(path, text),
    unregister: () => {
      live.delete(entry);
      if (!entry.shown) rmSync(path, { force: true });
    },
  };
}

/** The tail of every registered log, as printed under a failed test. */
export function failureReport(): string {
  const parts: string[] = [];
  for (const entry of live) {
    const { path, label } = entry;
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      continue; // nothing written yet
    }
    entry.shown = true;
    const lines = text.trimEnd().split('\n');
    const tail = lines.slice(-TAIL_LINES).join('\n');
    parts.push(`--- ${label}: last ${Math.min(lines.length, TAIL_LINES)} of ${lines.length} lines (${path})\n${tail}`);
  }
  return parts.join('\n');
}

/**
 * Diverts JSON log lines (`{"level":...`) this process writes to stderr into a file named for
 * the test file; other output passes through. Tests that spy on process.stderr still see every
 * line (their spy wraps this).
 */
export function divertInProcessLogs(testFile: string): void {
  const log = registerLogFile(`in-process-${basename(testFile).replace(/\W+/g, '_')}`);
  const write = process.stderr.write.bind(process.stderr) as (...args: unknown[]) => boolean;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    if (text.startsWith('{"level":')) {
      log.append(text);
      const callback = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      callback?.();
      return true;
    }
    return write(chunk, ...rest);
  }) as typeof process.stderr.write;
}
