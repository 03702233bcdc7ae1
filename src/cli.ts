#!/usr/bin/env node
/**
 * `herald [--config <path>]`: starts Herald, prints where it listens and the credentials in
 * use when they are the built-in development defaults. SIGTERM/SIGINT shut down gracefully;
 * SIGHUP re-reads the config file (never ends the process).
 * `herald reshard --shards <n> [--config <path>] [--data-dir <dir>]`: rewrites a stopped data
 * dir for another shard count (src/reshard.ts).
 * `herald push-to-postgres [--postgres-url <url>] [--config <path>] [--data-dir <dir>]`: moves
 * a stopped single node's push devices into the cluster's PostgreSQL
 * (src/push/store/postgres/push-to-postgres.ts).
 * `herald sandbox-gateway [--port <p>] [--host <loopback>] [--dir <dir>]`: local APNs, FCM and
 * web push for trying push without Apple or Google (src/sandbox/sandbox-gateway.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isLoopbackHost, loadConfig, ConfigError } from './config/load.js';
import { DEFAULT_ADMIN_TOKEN, DEFAULT_APP, DEFAULT_PUSH_INSTANCE, DEVELOPMENT_CONFIG } from './config/schema.js';
import { DataDirError } from './shards/data-dir.js';
import { reshard } from './reshard.js';
import { UwsLoadError } from './http/uws-native.js';
import { ClusterStartError, ListenError, startHerald, type RunningHerald } from './server.js';
import { describeError, log, setLogLevel } from './log.js';

const USAGE =
  'usage: herald [--config <file>] | --help | --version\n' +
  '       herald reshard --shards <n> [--config <file>] [--data-dir <dir>]\n' +
  '       herald push-to-postgres [--postgres-url <url>] [--config <file>] [--data-dir <dir>]\n' +
  '       herald sandbox-gateway [--port <port>] [--host <loopback address>] [--dir <dir>]\n';

/** Every environment variable Herald reads (a test keeps it in step with the sources). */
const HELP =
  USAGE +
  `
Options:
  -c, --config <file>   JSON config file (default: HERALD_CONFIG; none: the development defaults)
  -h, --help            this text
  -v, --version         the version

Environment (each wins over the config file):
  HERALD_CONFIG                    config file, when --config is not given
  HERALD_HOST, HERALD_PORT         host and port to listen on (host, port)
  HERALD_DATA_DIR                  data directory (dataDir)
  HERALD_SHARDS                    worker-thread shards (shards)
  HERALD_FRONT_END_THREADS         threads serving the port (frontEndThreads)
  HERALD_LOG_LEVEL                 debug, info, warn or error (logLevel)
  HERALD_ADMIN_TOKEN               admin API and dashboard token (admin.token; empty turns them off)
  HERALD_REDIS_URL                 redis:// or rediss:// URL: runs as a cluster node (cluster.redisUrl)
  HERALD_REDIS_SENTINELS           host:port,host:port of Redis Sentinels (cluster.sentinel.addresses)
  HERALD_REDIS_SENTINEL_MASTER     master group name the sentinels monitor (cluster.sentinel.masterName)
  HERALD_REDIS_SENTINEL_PASSWORD   the sentinels' own password (cluster.sentinel.password)
  HERALD_POSTGRES_URL              postgres:// URL of the cluster's shared push store (cluster.postgresUrl)
  HERALD_UWS_MODULE                path of another uWebSockets.js build to load
  HERALD_EXPOSE_DEVELOPMENT_DEFAULTS=1
                                   without a config file, serve the development credentials on
                                   a non-loopback HERALD_HOST (refused otherwise)

Subcommands: herald reshard --help, herald push-to-postgres --help, herald sandbox-gateway --help
  (sandbox-gateway: local APNs, FCM and web push gateways to try push without Apple or Google,
  docs/push-credentials.md, "Try it locally")

Docs, in the docs/ folder of the repository and of the installed package:
  docs/configuration.md (every setting), docs/sdks.md (pointing the Pusher and Beams SDKs at
  Herald), docs/push-credentials.md, docs/operations.md, docs/errors.md
`;

/** The package's version (package.json beside dist/). */
function heraldVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Parses the command line; a stray argument or unknown option prints the usage and exits 2. */
function argsOrUsage<T>(parse: () => T): T | null {
  try {
    return parse();
  } catch (err) {
    const code = (err as { code?: string }).code ?? '';
    if (!code.startsWith('ERR_PARSE_ARGS_')) throw err;
    process.stderr.write(`herald: ${(err as Error).message}\n${USAGE}Run herald --help for the options and environment variables.\n`);
    process.exitCode = 2;
    return null;
  }
}

async function reshardCommand(args: string[]): Promise<void> {
  const values = argsOrUsage(
    () =>
      parseArgs({
        args,
        options: {
          shards: { type: 'string' },
          config: { type: 'string', short: 'c' },
          'data-dir': { type: 'string' },
          help: { type: 'boolean', short: 'h', default: false },
        },
      }).values,
  );
  if (values === null) return;
  if (values.help || values.shards === undefined) {
    process.stdout.write(
      'usage: herald reshard --shards <n> [--config <file>] [--data-dir <dir>]\n' +
        'Rewrites a stopped data dir for <n> shards (1-64). Safe to interrupt: run it again to finish.\n',
    );
    if (!values.help) process.exitCode = 2;
    return;
  }
  const shards = Number(values.shards);
  const overrides: Record<string, unknown> = {};
  if (values['data-dir']) overrides.dataDir = values['data-dir'];
  const config = loadConfig({ configPath: values.config, overrides });
  const dataDir = resolve(config.dataDir);
  await reshard({ dataDir, shards, log: (line) => process.stdout.write(`herald reshard: ${line}\n`) });
  process.stdout.write(`data dir ${dataDir} now has ${shards} shard(s); start Herald with shards=${shards} (HERALD_SHARDS=${shards})\n`);
}

async function pushToPostgresCommand(args: string[]): Promise<void> {
  const values = argsOrUsage(
    () =>
      parseArgs({
        args,
        options: {
          'postgres-url': { type: 'string' },
          config: { type: 'string', short: 'c' },
          'data-dir': { type: 'string' },
          help: { type: 'boolean', short: 'h', default: false },
        },
      }).values,
  );
  if (values === null) return;
  const usage =
    'usage: herald push-to-postgres [--postgres-url <url>] [--config <file>] [--data-dir <dir>]\n' +
    "Copies a stopped node's push devices (interests, users) into PostgreSQL (default: the config's cluster.postgresUrl, HERALD_POSTGRES_URL).\n" +
    'Safe to interrupt: run it again to finish.\n';
  if (values.help) {
    process.stdout.write(usage);
    return;
  }
  const overrides: Record<string, unknown> = {};
  if (values['data-dir']) overrides.dataDir = values['data-dir'];
  const config = loadConfig({ configPath: values.config, overrides });
  const url = values['postgres-url'] ?? config.cluster?.postgresUrl;
  if (!url) {
    process.stderr.write(`herald push-to-postgres: no PostgreSQL URL: give --postgres-url, HERALD_POSTGRES_URL or cluster.postgresUrl\n${usage}`);
    process.exitCode = 2;
    return;
  }
  const dataDir = resolve(config.dataDir);
  // Loaded only for this command: the server's main thread never loads the PostgreSQL client.
  const { pushToPostgres, PushToPostgresError } = await import('./push/store/postgres/push-to-postgres.js');
  let interrupted = false;
  const stop = (): void => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stdout.write('herald push-to-postgres: interrupted; stopping after the batch under way (Ctrl-C again to stop at once)\n');
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    const result = await pushToPostgres({ dataDir, url, log: (line) => process.stdout.write(`herald push-to-postgres: ${line}\n`), stopRequested: () => interrupted });
    const figures = `${result.devices} device(s), ${result.subscriptions} subscription(s), ${result.usersAssociated} user association(s)`;
    if (!result.complete) {
      process.stdout.write(`herald push-to-postgres: stopped after ${figures}; run it again to finish\n`);
      process.exitCode = 130;
      return;
    }
    process.stdout.write(`push data of ${dataDir} copied to PostgreSQL: ${figures}\n`);
  } catch (err) {
    if (!(err instanceof PushToPostgresError)) throw err;
    process.stderr.write(`herald push-to-postgres: ${err.message}\n`);
    process.exitCode = 1;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

const SANDBOX_USAGE =
  'usage: herald sandbox-gateway [--port <port>] [--host <loopback address>] [--dir <dir>]\n' +
  'Local APNs, FCM and web push gateways on one loopback port, to see Herald deliver without Apple or Google.\n' +
  'It prints the push[] settings to give Herald, logs every notification and lists them at\n' +
  'http://<host>:<port>/sandbox. Tokens choose the answer (docs/push-credentials.md, "Try it locally"):\n' +
  '  unregistered (dead token)  FCM token or web subscription name unregistered-…, APNs token 0410…\n' +
  '  bad request                bad-…, APNs 0400…\n' +
  '  throttled (429)            throttled-…, APNs 0429…\n' +
  'Options:\n' +
  '  --port <port>   default 6011; 0 picks a free one\n' +
  '  --host <host>   127.0.0.1 (default), ::1 or localhost; nothing else\n' +
  '  --dir <dir>     its certificate and keys, kept for the next start (default: <temp dir>/herald-sandbox-<user>)\n';

async function sandboxGatewayCommand(args: string[]): Promise<void> {
  const values = argsOrUsage(
    () =>
      parseArgs({
        args,
        options: {
          port: { type: 'string', default: '6011' },
          host: { type: 'string', default: '127.0.0.1' },
          dir: { type: 'string' },
          help: { type: 'boolean', short: 'h', default: false },
        },
      }).values,
  );
  if (values === null) return;
  if (values.help) {
    process.stdout.write(SANDBOX_USAGE);
    return;
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`herald sandbox-gateway: --port must be 0 to 65535, got ${values.port}\n${SANDBOX_USAGE}`);
    process.exitCode = 2;
    return;
  }
  // Loaded only for this command: the server never loads the sandbox.
  const { startSandboxGateway, SandboxGatewayError } = await import('./sandbox/sandbox-gateway.js');
  const dir = resolve(values.dir ?? join(tmpdir(), `herald-sandbox-${userInfo().username}`));
  let sandbox;
  try {
    sandbox = await startSandboxGateway({ host: values.host, port, dir, log: (line) => process.stdout.write(`${line}\n`) });
  } catch (err) {
    if (!(err instanceof SandboxGatewayError)) throw err;
    process.stderr.write(`herald sandbox-gateway: ${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  // Development mode with the sandbox: the development defaults, their push instance pointed at it.
  const developmentConfigFile = join(dir, 'herald-config.json');
  const developmentConfig = { ...DEVELOPMENT_CONFIG, push: [{ ...DEFAULT_PUSH_INSTANCE, ...sandbox.pushConfig }] };
  writeFileSync(developmentConfigFile, JSON.stringify(developmentConfig, null, 2) + '\n', { mode: 0o600 });
  process.stdout.write(
    `Herald sandbox gateway (APNs, FCM, web push) listening on ${sandbox.origin}\n` +
      `received notifications: ${sandbox.pageUrl} (JSON: ${sandbox.pageUrl}/received)\n` +
      `keys and certificate: ${dir}\n` +
      `Development mode with it: HERALD_CONFIG=${/\s/.test(developmentConfigFile) ? `'${developmentConfigFile}'` : developmentConfigFile} npm start (the development app, push instance and admin token, on 127.0.0.1)\n` +
      `Or give a push instance these settings (push[] in Herald's config file; also in ${join(dir, 'push-config.json')}):\n` +
      `${JSON.stringify(sandbox.pushConfig, null, 2)}\n` +
      `A web push subscription to register: curl -X POST '${sandbox.pageUrl}/web-subscriptions?name=laptop'\n` +
      'Tokens choose the answer: unregistered-… / bad-… / throttled-… (APNs: 0410… / 0400… / 0429…); see herald sandbox-gateway --help\n' +
      'Herald deletes a device on a dead-token answer only once that gateway has accepted one of its sends since Herald started.\n',
  );
  const stop = (): void => {
    sandbox.stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function main(): Promise<void> {
  if (process.argv[2] === 'reshard') return reshardCommand(process.argv.slice(3));
  if (process.argv[2] === 'push-to-postgres') return pushToPostgresCommand(process.argv.slice(3));
  if (process.argv[2] === 'sandbox-gateway') return sandboxGatewayCommand(process.argv.slice(3));
  // SIGHUP's default action ends the process: until Herald is up, remember it and reload after.
  let hangupDuringStart = false;
  const early = (): void => {
    hangupDuringStart = true;
  };
  process.on('SIGHUP', early);
  const values = argsOrUsage(() =>
    parseArgs({
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', short: 'v', default: false },
      },
    }).values,
  );
  if (values === null) return;
  if (values.version) {
    process.stdout.write(`herald ${heraldVersion()}\n`);
    return;
  }
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  const configPath = values.config ?? process.env.HERALD_CONFIG;
  const config = loadConfig({ configPath: values.config });
  setLogLevel(config.logLevel);
  const herald = await startHerald(config);
  const [http, ws] = herald.secure ? ['https', 'wss'] : ['http', 'ws'];
  // The address really listened on; links to open on this machine use loopback for a wildcard.
  const everywhere = config.host === '0.0.0.0' || config.host === '::';
  const listenHost = urlHost(config.host);
  const linkHost = everywhere ? '127.0.0.1' : listenHost;
  const lines = [
    `Herald listening on ${http}://${listenHost}:${herald.port}${everywhere ? ', every network interface' : ''} (${ws}://${listenHost}:${herald.port}/app/<key>)`,
    `data dir: ${resolve(config.dataDir)}, shards: ${config.shards}`,
  ];
  if (herald.metricsPort !== null) lines.push(`metrics on http://${config.metrics?.host}:${herald.metricsPort}/metrics`);
  if (config.admin.token !== null) {
    // The token itself is printed only when it is the public development one.
    const devToken = config.admin.token === DEFAULT_ADMIN_TOKEN;
    lines.push(`dashboard: ${http}://${linkHost}:${herald.port}/dashboard${devToken ? `#token=${DEFAULT_ADMIN_TOKEN}` : ' (sign in with the admin token)'}`);
  } else {
    lines.push('dashboard: off (no admin token); to turn it on, set admin.token in the config file or HERALD_ADMIN_TOKEN to a secret of at least 16 characters');
  }
  if (configPath) {
    // A config file means what it says: no apps or push key, none of them.
    if (config.apps.length === 0) lines.push('channels: no apps configured (apps[] in the config file)');
    if (config.push.length === 0) lines.push('push: no instances configured (push[] in the config file)');
  } else {
    lines.push(`development mode (no config file): ${everywhere || !isLoopbackHost(config.host) ? `listening on ${config.host} as HERALD_HOST says` : 'loopback only (HERALD_HOST to change)'}; client events and user authentication on`);
  }
  const defaultApp = config.apps.find((a) => a.id === DEFAULT_APP.id && a.secret === DEFAULT_APP.secret);
  const defaultPush = config.push.find((p) => p.instanceId === DEFAULT_PUSH_INSTANCE.instanceId && p.secretKey === DEFAULT_PUSH_INSTANCE.secretKey);
  if (defaultApp || defaultPush) {
    lines.push('WARNING: built-in development credentials are active; do not use them in production.');
    if (defaultApp) lines.push(`  channels app: id=${DEFAULT_APP.id} key=${DEFAULT_APP.key} secret=${DEFAULT_APP.secret}`);
    if (defaultPush) lines.push(`  push instance: instanceId=${DEFAULT_PUSH_INSTANCE.instanceId} secretKey=${DEFAULT_PUSH_INSTANCE.secretKey}`);
  }
  if (config.admin.token === DEFAULT_ADMIN_TOKEN) {
    lines.push(`WARNING: the development admin token is active (admin token: ${DEFAULT_ADMIN_TOKEN}); set admin.token or HERALD_ADMIN_TOKEN in production.`);
  }
  process.stdout.write(lines.join('\n') + '\n');

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      log.warn('second signal: exiting now', { signal });
      process.exit(1);
    }
    log.info('signal received', { signal });
    const hardStop = setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutSeconds * 1000 + 2000);
    hardStop.unref();
    herald.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('shutdown failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  // A front-end thread died: Herald stops what runs (connections closed with 4200), and the
  // process ends with an error code for its supervisor to restart it.
  void herald.failed.then(() => {
    const hardStop = setTimeout(() => process.exit(1), config.shutdownTimeoutSeconds * 1000 + 2000);
    hardStop.unref();
    herald.stop().finally(() => process.exit(1));
  });
  // A rejected promise nobody awaited is a bug; log it rather than let Node end the process
  // and every connection with it.
  process.on('unhandledRejection', (reason: unknown) => {
    log.error('unhandled promise rejection', { error: describeError(reason) });
  });
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const reload = reloader(herald, values.config);
  process.on('SIGHUP', reload);
  process.off('SIGHUP', early);
  if (hangupDuringStart) reload();
}

/** A host as it goes in a URL: IPv6 addresses in brackets. */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * The SIGHUP handler: re-reads the config file and applies it (server.ts reload). An invalid
 * file keeps the running config and logs why; reloads never overlap (a SIGHUP during one runs
 * once more after it); nothing here may end the process.
 */
function reloader(herald: RunningHerald, configPath: string | undefined): () => void {
  let running = false;
  let again = false;
  const once = async (): Promise<void> => {
    let next;
    try {
      next = loadConfig({ configPath });
    } catch (err) {
      log.error('config reload refused: keeping the running config', { error: err instanceof ConfigError ? err.message : String(err) });
      return;
    }
    try {
      const report = await herald.reload(next);
      // The warning first: the outcome line ends the reload for whoever reads the log.
      if (report.restartNeeded.length > 0) {
        log.warn('config reload: these settings changed but need a restart; the running values are kept', { restartNeeded: report.restartNeeded });
      }
      if (report.notApplied.length > 0) log.warn('config reload: not taken everywhere (see each line above)', { notApplied: report.notApplied });
      log.info('config reloaded', { changed: report.changed, closedConnections: report.closedConnections });
    } catch (err) {
      log.error('config reload refused: keeping the running config', { error: err instanceof ConfigError ? err.message : describeError(err) });
    }
  };
  const run = (): void => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    log.info('SIGHUP: reloading the config file', { configPath: configPath ?? process.env.HERALD_CONFIG ?? null });
    once()
      .catch((err: unknown) => log.error('config reload failed', { error: String(err) }))
      .finally(() => {
        running = false;
        if (again) {
          again = false;
          run();
        }
      });
  };
  return run;
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof DataDirError || err instanceof ListenError || err instanceof ClusterStartError || err instanceof UwsLoadError) {
    process.stderr.write(`herald: ${err.message}\n`);
  } else {
    process.stderr.write(`herald: failed to start: ${describeError(err)}\n`);
  }
  process.exit(1);
});
