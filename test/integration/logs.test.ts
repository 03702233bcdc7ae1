/**
 * Logs of the built server at debug level: refused connections with their close code, auth
 * failures with the reason (never a secret), 4xx answers with their code, a flood of refused
 * connections kept to a line or two; an unknown level is a start-up error.
 */
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEFAULT_APP, HeraldProcess, REPO_ROOT, startHerald } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { flushedBy, until } from '../helpers/wait.js';

let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({ shards: 1, env: { HERALD_LOG_LEVEL: 'debug' } });
});

afterAll(async () => {
  await herald?.dispose();
});

interface LogLine {
  level: string;
  time: string;
  msg: string;
  [field: string]: unknown;
}

function lines(): LogLine[] {
  return herald.stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

/** The first log line `match` finds, once it is logged. */
function logged(match: (l: LogLine) => boolean, what: string): Promise<LogLine> {
  return until(() => lines().find(match), () => `the log line ${what} in:\n${herald.stderr}`);
}

/**
 * A rate-limited line logged once: with several front-end threads (HERALD_FRONT_END_THREADS, as
 * npm run test:threads runs this file) each thread limits its own lines, so once per thread at most.
 */
function loggedOnce(count: number): void {
  expect(count).toBeGreaterThanOrEqual(1);
  expect(count).toBeLessThanOrEqual(Number(process.env.HERALD_FRONT_END_THREADS || 1));
}

function closeCodeOf(url: string): Promise<number> {
  const ws = new WebSocket(url);
  return new Promise((resolve, reject) => {
    ws.on('close', (code) => resolve(code));
    ws.on('error', reject);
  });
}

describe('logs at debug level', () => {
  it('are JSON lines with time, level and msg', () => {
    const started = lines().find((l) => l.msg === 'herald listening')!;
    expect(started).toMatchObject({ level: 'info', port: herald.port });
    expect(new Date(started.time).toISOString()).toBe(started.time);
  });

  it('log a refused connection with its close code, and a flood of them as one line', async () => {
    const url = `ws://127.0.0.1:${herald.port}/app/no-such-key?protocol=7`;
    expect(await closeCodeOf(url)).toBe(4001);
    const line = await logged((l) => l.msg === 'websocket connection refused' && l.code === 4001, 'websocket connection refused 4001');
    expect(line).toMatchObject({ level: 'debug', reason: "no app has key 'no-such-key' (apps[].key)" });
    // The unknown key itself at info, whatever the log level: once per key and minute.
    const unknown = (key: string) => lines().filter((l) => l.msg === `websocket: no app has key '${key}' (apps[].key)`);
    expect(unknown('no-such-key')[0]).toMatchObject({ level: 'info', key: 'no-such-key', via: 'websocket' });
    for (let batch = 0; batch < 4; batch++) {
      await Promise.all(Array.from({ length: 50 }, () => closeCodeOf(url)));
    }
    // Another key is another line; logged after whatever the flood logged, it is also the marker.
    await flushedBy(
      async () => expect(await closeCodeOf(`ws://127.0.0.1:${herald.port}/app/other-key?protocol=7`)).toBe(4001),
      () => unknown('other-key').length > 0,
      "the other key's line",
    );
    // 202 refusals within the 10 s window: one line (the first), the rest counted for later.
    loggedOnce(lines().filter((l) => l.msg === 'websocket connection refused' && l.code === 4001).length);
    loggedOnce(unknown('no-such-key').length);
  });

  it('log an auth failure with its reason and never the secret', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${DEFAULT_APP.key}?protocol=7`);
    const frames: Frame[] = [];
    ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
    try {
      await until(() => frames.some((f) => f.event === 'pusher:connection_established'), 'pusher:connection_established');
      const auth = `${DEFAULT_APP.key}:${createHmac('sha256', 'wrong-secret').update('x').digest('hex')}`;
      ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'private-logs', auth } }));
      const line = await logged((l) => l.msg === 'websocket auth failed', 'websocket auth failed');
      expect(line).toMatchObject({ level: 'debug', appId: DEFAULT_APP.id, channel: 'private-logs', reason: 'invalid channel signature' });
    } finally {
      ws.close();
    }
  });

  it('log 4xx answers with their error code', async () => {
    const res = await fetch(`${herald.baseUrl}/apps/${DEFAULT_APP.id}/channels?auth_key=${DEFAULT_APP.key}&auth_timestamp=1&auth_version=1.0&auth_signature=00`);
    expect(res.status).toBe(401);
    const line = await logged((l) => l.msg === 'http request refused' && l.status === 401, 'http request refused 401');
    expect(line).toMatchObject({ level: 'debug', method: 'get', api: 'channels' });
    expect(typeof line.code).toBe('string');
    expect(herald.stderr).not.toContain(DEFAULT_APP.secret);
  });

  it('log a channel API request with an unknown app key at info, once per key and minute', async () => {
    const url = `${herald.baseUrl}/apps/${DEFAULT_APP.id}/channels?auth_key=stale-key&auth_timestamp=1&auth_version=1.0&auth_signature=00`;
    for (let i = 0; i < 3; i++) {
      const res = await fetch(url);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'AUTH_UNKNOWN_KEY', error: "no app has key 'stale-key' (apps[].key)" });
    }
    const line = await logged((l) => l.msg === "channel API: no app has key 'stale-key' (apps[].key)", 'of the unknown key');
    expect(line).toMatchObject({ level: 'info', key: 'stale-key', via: 'channel API' });
    // The marker: another key's line, logged after any the repeats would have.
    await flushedBy(
      async () => expect((await fetch(url.replace('stale-key', 'marker-key'))).status).toBe(401),
      () => lines().some((l) => l.msg === "channel API: no app has key 'marker-key' (apps[].key)"),
      "the marker key's line",
    );
    loggedOnce(lines().filter((l) => l.msg === line.msg).length);
  });
});

describe('log level', () => {
  it('an unknown HERALD_LOG_LEVEL is a start-up error', async () => {
    const bad = new HeraldProcess({ shards: 1, env: { HERALD_LOG_LEVEL: 'verbose' } });
    try {
      await expect(bad.start()).rejects.toThrow(/HERALD_LOG_LEVEL must be one of debug, info, warn, error, got "verbose"/);
    } finally {
      await bad.dispose();
    }
  });

  it('an unknown logLevel in the file is a start-up error naming the field', async () => {
    const bad = new HeraldProcess({ shards: 1, config: { logLevel: 'loud' }, env: { HERALD_LOG_LEVEL: '' } });
    try {
      await expect(bad.start()).rejects.toThrow(/invalid config at logLevel/);
    } finally {
      await bad.dispose();
    }
  });
});

describe('log output', () => {
  const program = `const m = await import(${JSON.stringify(join(REPO_ROOT, 'dist/src/log.js'))}); m.log.info('hello', { a: 1 });`;

  it('is human-readable on a terminal', () => {
    // `script` runs the command on a pseudo-terminal.
    const run = spawnSync('script', ['-qec', `${JSON.stringify(process.execPath)} --input-type=module -e ${JSON.stringify(program)}`, '/dev/null'], {
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, HERALD_LOG_LEVEL: 'info' },
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/INFO.*hello/);
    expect(run.stdout).not.toContain('{"level"');
  });

  it('is one JSON object per line otherwise', () => {
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', program], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, HERALD_LOG_LEVEL: 'info' } });
    expect(JSON.parse(run.stderr.trim())).toMatchObject({ level: 'info', msg: 'hello', a: 1 });
  });
});
