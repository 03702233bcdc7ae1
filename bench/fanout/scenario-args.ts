/** The scenario part of a whole-system bench's command line (bench:fanout, bench:cluster). */

/**
 * With `help`, prints `usage` and the scenario names and exits 0; exits 2 on an unknown name;
 * otherwise the named scenarios, or all but the `onlyWhenNamed` ones when none is named.
 */
export function selectScenarios<T extends { name: string; onlyWhenNamed?: boolean }>(all: readonly T[], positionals: readonly string[], help: boolean, usage: string): T[] {
  const names = all.map((s) => s.name).join(', ');
  if (help) {
    process.stdout.write(`${usage}\nscenarios: ${names}\n`);
    process.exit(0);
  }
  const unknown = positionals.filter((name) => !all.some((s) => s.name === name));
  if (unknown.length) {
    process.stderr.write(`unknown scenario(s): ${unknown.join(', ')}; known: ${names}\n`);
    process.exit(2);
  }
  return positionals.length ? all.filter((s) => positionals.includes(s.name)) : all.filter((s) => !s.onlyWhenNamed);
}
