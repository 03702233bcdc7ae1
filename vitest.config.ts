import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Log lines of spawned servers and in-process shards go to files, shown when a test fails.
    setupFiles: ['test/setup/logs.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers as child processes; two cores are shared between them.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
