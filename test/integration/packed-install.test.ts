/**
 * The npm package as users get it: `npm pack` of this checkout (built dist/), installed into an
 * empty project with the production dependencies (npm's cache first, the registry for what it
 * lacks), started from the installed `herald` bin: it serves the dashboard (its HTML and assets
 * come from dist/dashboard, which the package must carry) and carries the LICENSE.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { name: string; version: string; allowScripts: Record<string, boolean> };
const work = mkdtempSync(join(tmpdir(), 'herald-packed-'));
const project = join(work, 'project');
const installed = join(project, 'node_modules', pkg.name);
let herald: HeraldProcess | undefined;

/** npm, quiet, output kept for the failure message. */
function npm(args: string[], cwd: string): string {
  try {
    return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: 'pipe', encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`npm ${args.join(' ')} failed\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

beforeAll(() => {
  // The checkout is built already (the test run builds first): pack it without running prepack again.
  npm(['pack', '--ignore-scripts', '--pack-destination', work], REPO_ROOT);
  execFileSync('mkdir', [project]);
  // The native dependencies' install scripts, allowed as this package allows them (npm 11 asks).
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'herald-packed-install', private: true, allowScripts: pkg.allowScripts }));
  npm(['install', '--prefer-offline', '--omit=dev', join(work, `${pkg.name}-${pkg.version}.tgz`)], project);
}, 240_000);

afterAll(async () => {
  await herald?.dispose();
  rmSync(work, { recursive: true, force: true });
});

describe('the packed install', () => {
  it('carries the dashboard, the LICENSE, the Grafana and Prometheus files and the bin', () => {
    for (const file of ['dist/dashboard/index.html', 'dist/src/cli.js', 'LICENSE', 'README.md', 'deploy/grafana/herald-dashboard.json', 'deploy/prometheus/herald-alerts.yml']) {
      expect(existsSync(join(installed, file)), file).toBe(true);
    }
    expect(readFileSync(join(installed, 'LICENSE'), 'utf8')).toContain('Apache License');
    expect(existsSync(join(project, 'node_modules', '.bin', 'herald'))).toBe(true);
  });

  it('starts from its bin and serves GET /dashboard with its assets', async () => {
    herald = await startHerald({ cli: join(project, 'node_modules', '.bin', 'herald'), shards: 1 });
    const page = await fetch(`${herald.baseUrl}/dashboard`);
    const html = await page.text();
    expect(page.status, html).toBe(200);
    expect(html).toContain('Herald dashboard');
    const assets = [...html.matchAll(/(?:href|src)="(\/dashboard\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      const res = await fetch(`${herald.baseUrl}${asset}`);
      expect(res.status, asset).toBe(200);
      expect((await res.arrayBuffer()).byteLength, asset).toBeGreaterThan(0);
    }
  });

  it('exports ./recovery: a dependency-free ES module with its types', () => {
    const script = `import { withRecovery } from '${pkg.name}/recovery'; console.log(typeof withRecovery);`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: project, encoding: 'utf8' }).trim()).toBe('function');
    const module = readFileSync(join(installed, 'dist/src/client/recovery.js'), 'utf8');
    expect(module).not.toMatch(/^\s*import\s/m);
    expect(existsSync(join(installed, 'dist/src/client/recovery.d.ts'))).toBe(true);
  });
});
