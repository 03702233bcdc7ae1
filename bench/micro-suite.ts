/**
 * The contract of a micro-benchmark module: `bench/<path mirroring src/>.bench.ts` exports
 * `suite`, which bench/micro.ts finds, sets up, runs with tinybench and tears down.
 */
import type { Bench } from 'tinybench';

/** What setup() may hand back: a teardown, or a reason to skip the suite. */
export type SetupResult = { teardown?: () => void | Promise<void> } | { skip: string } | void;

export interface MicroSuite {
  /** The src/ module the suite measures, e.g. `src/shards/hash.ts`. */
  source: string;
  /** Fewest samples per task (tinybench's default is 64; slow tasks may ask for fewer). */
  minIterations?: number;
  /** Adds tasks to `bench` (and prepares data, e.g. a seeded store). */
  setup(bench: Bench, options: { quick: boolean }): SetupResult | Promise<SetupResult>;
}
