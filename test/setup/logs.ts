/**
 * vitest setup (every test file): log lines go to files (test/helpers/test-logs.ts), and a
 * failed test prints the tail of each log that was live during it.
 */
import { afterEach, beforeAll, expect } from 'vitest';
import { divertInProcessLogs, failureReport } from '../helpers/test-logs.js';

beforeAll(() => {
  divertInProcessLogs(expect.getState().testPath ?? 'unknown');
});

afterEach((context) => {
  if (context.task.result?.state !== 'fail') return;
  const report = failureReport();
  if (report) process.stdout.write(`\nLogs around the failure of "${context.task.name}":\n${report}\n`);
});
