import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers as child processes; two cores are shared between them.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
