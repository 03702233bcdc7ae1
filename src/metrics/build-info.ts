/** Herald's version, for `herald_build_info`: the `version` of the package.json Herald runs from. */
import { readFileSync } from 'node:fs';

/** Read once; 'unknown' when the package.json is not where an install or a checkout puts it. */
export function heraldVersion(): string {
  // dist/src/metrics/ (built) and src/metrics/ (sources) both sit under the package root.
  for (const up of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'herald' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // Not there: try the next.
    }
  }
  return 'unknown';
}
