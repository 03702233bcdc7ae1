/**
 * Careless operators: a second Herald on the same port or the same data dir, a data dir that
 * cannot be written, a uWebSockets.js without a native binary, the build chosen by itself, and
 * another uWS build named by HERALD_UWS_MODULE. Each start-up refusal is a non-zero exit with one
 * clear line on stderr.
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadUws } from '../../src/http/uws-native.js';
import { CLI, HeraldProcess, REPO_ROOT, startHerald } from '../helpers/herald-process.js';

const scratch = mkdtempSync(join(tmpdir(), 'herald-operators-'));
const running: HeraldProcess[] = [];

afterAll(async () => {
  await Promise.all(running.map((h) => h.dispose()));
  rmSync(scratch, { recursive: true, force: true });
});

async function started(options: ConstructorParameters<typeof HeraldProcess>[0] = {}): Promise<HeraldProcess> {
  const herald = await startHerald({ shards: 1, ...options });
  running.push(herald);
  return herald;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI until it exits (or until it prints its listening line: then it is stopped and
 * `listening` is true).
 */
function runCli(env: Record<string, string>, opts: { uid?: number; configPath?: string } = {}): Promise<Run & { listening: boolean }> {
  return new Promise((resolve, reject) => {
    const args = [CLI, ...(opts.configPath ? ['--config', opts.configPath] : [])];
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: '0', HERALD_SHARDS: '1', HERALD_LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.uid !== undefined ? { uid: opts.uid, gid: opts.uid } : {}),
    });
    let stdout = '';
    let stderr = '';
    let listening = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`herald neither exited nor listened in 30 s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 30_000);
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!listening && /listening on http/.test(stdout)) {
        listening = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, listening });
    });
  });
}

describe('a port is one Herald\'s unless shared on purpose', () => {
  it('a second Herald on a port in use exits 1 saying so', async () => {
    const first = await started();
    const second = await runCli({ HERALD_PORT: String(first.port), HERALD_DATA_DIR: join(scratch, 'port-second') });
    expect(second.listening).toBe(false);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`cannot listen on 127.0.0.1:${first.port}: it is in use`);
    // Another port comes first as the remedy; sharing the port is for a cluster's nodes.
    const remedies = second.stderr.slice(second.stderr.indexOf('cannot listen on'));
    expect(remedies.indexOf('another port (port, or HERALD_PORT)')).toBeGreaterThan(0);
    expect(remedies.indexOf('another port (port, or HERALD_PORT)')).toBeLessThan(remedies.indexOf('"reusePort": true'));
    // The first one still serves.
    expect((await fetch(`${first.baseUrl}/ready`)).status).toBe(200);
  });

  it('two Heralds that both set reusePort share the port', async () => {
    const config = join(scratch, 'reuse.json');
    writeFileSync(config, JSON.stringify({ reusePort: true }));
    // A fixed port: Linux does not share a port the first socket got by binding port 0.
    const first = new HeraldProcess({ shards: 1, config: { reusePort: true } });
    running.push(first);
    first.port = await freePort();
    await first.start();
    const second = await runCli({ HERALD_PORT: String(first.port), HERALD_DATA_DIR: join(scratch, 'reuse-second') }, { configPath: config });
    expect(second.stderr).not.toContain('cannot listen');
    expect(second.listening).toBe(true);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe('a data dir is one Herald\'s', () => {
  it('a second Herald on a data dir in use exits 1 naming the dir and the holder\'s pid; kill -9 leaves no stale lock', async () => {
    const first = await started();
    const second = await runCli({ HERALD_DATA_DIR: first.dataDir });
    expect(second.listening).toBe(false);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`data dir ${first.dataDir} is in use by another Herald process (pid ${first.child!.pid})`);
    expect(second.stderr).toContain('a data dir of its own (dataDir, or HERALD_DATA_DIR)');

    await first.kill9();
    const third = await runCli({ HERALD_DATA_DIR: first.dataDir });
    expect(third.stderr).not.toContain('in use');
    expect(third.listening).toBe(true);
  });

  it('a data dir that cannot be written fails with the errno code and the path', async () => {
    const file = join(scratch, 'a-file');
    writeFileSync(file, 'not a directory');
    const underFile = await runCli({ HERALD_DATA_DIR: join(file, 'data') });
    expect(underFile.code).toBe(1);
    expect(underFile.stderr).toContain(`data dir ${join(file, 'data')}: cannot create it (ENOTDIR)`);

    // Not writable for the user Herald runs as (as root, run it as nobody: root writes anywhere).
    const readOnly = join(scratch, 'read-only');
    mkdirSync(readOnly);
    chmodSync(scratch, 0o755);
    chmodSync(readOnly, 0o555);
    const asRoot = process.getuid?.() === 0;
    const denied = await runCli({ HERALD_DATA_DIR: readOnly }, asRoot ? { uid: 65534 } : {});
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain(`data dir ${readOnly}: cannot create ${join(readOnly, 'herald.lock')} (EACCES): permission denied`);
  });
});

describe('uWebSockets.js', () => {
  it('refuses a build without its native binary, saying which Node/glibc combinations work and what to install', async () => {
    const run = await runCli({ HERALD_UWS_MODULE: './test/fixtures/uws/js-fallback.cjs', HERALD_DATA_DIR: join(scratch, 'fallback') });
    expect(run.listening).toBe(false);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('only its JavaScript fallback loaded');
    expect(run.stderr).toContain('Node 22 or 24 on glibc >= 2.38');
    expect(run.stderr).toContain('Node 20 on an older glibc');
    expect(run.stderr).toContain('HERALD_UWS_MODULE=');
  });

  it('chooses an installed build by itself and logs which', async () => {
    const run = await runCli({ HERALD_DATA_DIR: join(scratch, 'uws-auto') });
    expect(run.listening).toBe(true);
    expect(run.stderr).toContain(`"uws":${JSON.stringify(loadUws({}).build)}`);
  });

  it('loads the build HERALD_UWS_MODULE names, and says so when it cannot', async () => {
    const fixture = join(REPO_ROOT, 'test/fixtures/uws-module.cjs');
    const other = await runCli({ HERALD_UWS_MODULE: './test/fixtures/uws-module.cjs', HERALD_DATA_DIR: join(scratch, 'uws-module') });
    expect(other.listening).toBe(true);
    expect(other.stderr).toContain(`"uws":${JSON.stringify(fixture)}`);

    const missing = await runCli({ HERALD_UWS_MODULE: './no-such-uws.js', HERALD_DATA_DIR: join(scratch, 'uws-missing') });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot load uWebSockets.js from "./no-such-uws.js" (HERALD_UWS_MODULE)');
  });
});
