/**
 * The shape docs/architecture.md describes, checked on the source: the shard layer imports no
 * area, route modules never see the shard pool, and no code under src/channels/ws sends to a
 * uWS topic itself (every frame for a channel goes through the channel adapter; its corks batch
 * one socket's own frames), and WebSockets and HTTP fallback sessions share one socket
 * interface. The cluster (src/cluster) sits below the areas that share state through it, and
 * nothing outside src/channels reaches into the Redis channel adapter.
 * The push store interfaces (src/push/store) own their types; the implementations import them.
 * The sandbox gateway (src/sandbox) stands apart: it imports nothing of the server, and only the
 * CLI loads it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '../../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

function importsOf(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1]!);
}

const rel = (file: string): string => relative(SRC, file);

describe('architecture', () => {
  it('nothing under src/shards imports an area', () => {
    const offending = sources(join(SRC, 'shards')).flatMap((file) =>
      importsOf(file)
        .filter((spec) => /\/(channels|push|webhooks)\//.test(spec))
        .map((spec) => `${rel(file)} imports ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('nothing under src/shards imports outside the shard layer but config, errors and log', () => {
    // The generic runtime sits below every area and below metrics (which reads the shards).
    const offending = sources(join(SRC, 'shards')).flatMap((file) =>
      importsOf(file)
        .filter((spec) => spec.startsWith('.') && !spec.startsWith('./') && !/^\.\.\/(config\/schema|errors|log)\.js$/.test(spec))
        .map((spec) => `${rel(file)} imports ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('imports between areas run one way', () => {
    // [folder, folder its modules may not import]: what both sides need lives where both may
    // import it (src/channels/frames.ts, socket-registry.ts and quota.ts, src/http/topic-fanout.ts,
    // src/push/web-subscription.ts).
    const rules: [string, RegExp][] = [
      ['channels/adapter', /\/ws\/|\/http-api\//], // the adapter sits below the WebSocket endpoint and the HTTP API
      ['http', /\/(channels|push|webhooks|admin|shards)\//], // the HTTP layer imports no area, nor admin or the shard layer
      ['push/http', /\/(gateways|shard)\/|shard-handlers/], // main-thread push code never imports shard-side modules
      ['push/clients', /\/(gateways|shard)\/|shard-handlers/],
    ];
    const offending = rules.flatMap(([folder, forbidden]) =>
      sources(join(SRC, folder)).flatMap((file) =>
        importsOf(file)
          .filter((spec) => spec.startsWith('.') && forbidden.test(spec))
          .map((spec) => `${rel(file)} imports ${spec}`),
      ),
    );
    expect(offending).toEqual([]);
  });

  it('src/reshard.ts imports no area: each area declares its layout beside its store (src/shard-layouts.ts lists them)', () => {
    const offending = importsOf(join(SRC, 'reshard.ts'))
      .filter((spec) => /\/(channels|push|webhooks|tenants|admin)\//.test(spec))
      .map((spec) => `reshard.ts imports ${spec}`);
    expect(offending).toEqual([]);
  });

  it('no code outside the channel adapter tells the adapters apart by class: what a cluster adds is adapter.cluster', () => {
    const offending = sources(SRC)
      .filter((file) => !file.startsWith(join(SRC, 'channels/adapter')))
      .filter((file) => /instanceof (Redis|Local)ChannelAdapter/.test(readFileSync(file, 'utf8')))
      .map(rel);
    expect(offending).toEqual([]);
  });

  it('nothing outside src/channels imports the Redis channel adapter: the cluster itself is src/cluster', () => {
    // The composition root opens the adapter through its factory (channels/adapter/open-adapter.ts);
    // the areas that keep state in Redis (tenants, webhooks) use the cluster's connection and
    // membership, and keep their keys beside their stores.
    const offending = sources(SRC)
      .filter((file) => !file.startsWith(join(SRC, 'channels')))
      .flatMap((file) =>
        importsOf(file)
          .filter((spec) => /(^|\/)channels\/adapter\/redis\//.test(spec))
          .map((spec) => `${rel(file)} imports ${spec}`),
      );
    expect(offending).toEqual([]);
  });

  it('src/cluster imports no area', () => {
    const offending = sources(join(SRC, 'cluster')).flatMap((file) =>
      importsOf(file)
        .filter((spec) => /\/(channels|push|webhooks|tenants|admin)\//.test(spec))
        .map((spec) => `${rel(file)} imports ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('the push store interfaces own their types: they import no implementation (push/shard, postgres/, lmdb-*)', () => {
    // The LMDB and PostgreSQL stores import the interface, never the other way round.
    const interfaces = ['device-store.ts', 'publish-record-store.ts', 'namespaces.ts'].map((name) => join(SRC, 'push/store', name));
    const offending = interfaces.flatMap((file) =>
      importsOf(file)
        .filter((spec) => /\/shard\/|postgres\/|lmdb-/.test(spec))
        .map((spec) => `${rel(file)} imports ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('nothing outside src/admin and the composition roots imports admin', () => {
    // The composition roots: the process' (server.ts), a front-end thread's and the main thread's side of them.
    const roots = [join(SRC, 'server.ts'), join(SRC, 'front-end', 'thread.ts'), join(SRC, 'front-end', 'threads.ts')];
    const offending = sources(SRC)
      .filter((file) => !file.startsWith(join(SRC, 'admin')) && !roots.includes(file))
      .flatMap((file) =>
        importsOf(file)
          .filter((spec) => /(^|\/)admin\//.test(spec))
          .map((spec) => `${rel(file)} imports ${spec}`),
      );
    expect(offending).toEqual([]);
  });

  it('the debug tap (src/debug-tap) sits below every area: it imports none but type-only messages', () => {
    // The areas report to it and admin implements it (admin/debug-hub.ts).
    const offending = sources(join(SRC, 'debug-tap')).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/^import (type )?[^;]*?from '(\.\.\/[^']+)'/gm)]
        .filter((m) => !(m[1] && /^\.\.\/\w+\/messages\//.test(m[2]!)))
        .map((m) => `${rel(file)} imports ${m[2]}`),
    );
    expect(offending).toEqual([]);
  });

  it('src/sandbox (the sandbox gateway) imports nothing of the server, and only the CLI loads it', () => {
    // It stands in for Apple's and Google's gateways: it meets Herald over the network only.
    const inward = sources(join(SRC, 'sandbox')).flatMap((file) =>
      importsOf(file)
        .filter((spec) => spec.startsWith('.') && !spec.startsWith('./'))
        .map((spec) => `${rel(file)} imports ${spec}`),
    );
    const outward = sources(SRC)
      .filter((file) => !file.startsWith(join(SRC, 'sandbox')) && file !== join(SRC, 'cli.ts'))
      .flatMap((file) => importsOf(file).filter((spec) => /(^|\/)sandbox\//.test(spec)).map((spec) => `${rel(file)} imports ${spec}`));
    expect([...inward, ...outward]).toEqual([]);
  });

  it('route modules do not import the shard pool', () => {
    const routeModules = sources(SRC).filter((file) => /routes\.ts$|\/http\//.test(file) && !file.startsWith(join(SRC, 'shards')));
    expect(routeModules.length).toBeGreaterThan(5);
    const offending = routeModules.filter((file) => importsOf(file).some((spec) => spec.endsWith('shards/pool.js'))).map(rel);
    expect(offending).toEqual([]);
  });

  it('no code under src/channels/ws publishes to a uWS topic', () => {
    // uWS `app.publish` / `ws.publish`; `adapter.publish(` is the way through the adapter.
    const offending = sources(join(SRC, 'channels/ws')).filter((file) => /(?<!adapter)\.publish\(/.test(readFileSync(file, 'utf8'))).map(rel);
    expect(offending).toEqual([]);
  });

  it('corks under src/channels/ws batch one connection\'s own frames, never a topic', () => {
    // `ws.cork` / `res.cork`: one socket (or upgrade response); anything they send to others goes
    // through `adapter.publish` (checked above). See docs/architecture.md, "Channel state and delivery".
    const corks = sources(join(SRC, 'channels/ws')).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/([\w.$]+)\s*\.\s*cork\s*\(/g)].map((m) => `${rel(file)}: ${m[1]}.cork`),
    );
    expect(corks.length).toBeGreaterThan(0);
    expect(corks.filter((cork) => !/: (ws|res)\.cork$/.test(cork))).toEqual([]);
  });

  it('WebSockets and HTTP fallback sessions meet as ClientSockets (socket-registry.ts), never through a cast', () => {
    // A session is not a uWS WebSocket: what the endpoint, the registry and the adapter use of a
    // socket is ClientSocket, which both implement; the fallback drives a session through the
    // endpoint's SocketEvents, not its uWS behaviour.
    const folders = ['channels/ws', 'channels/http-fallback', 'channels/adapter'];
    const casts = folders.flatMap((folder) => sources(join(SRC, folder))).filter((file) => /as unknown as (Ws|WebSocket|SessionSocket|ClientSocket|ChannelSocket)\b/.test(readFileSync(file, 'utf8')));
    const behaviour = sources(join(SRC, 'channels/http-fallback')).filter((file) => /\.behavior\b/.test(readFileSync(file, 'utf8')));
    expect([...casts, ...behaviour].map(rel)).toEqual([]);
  });
});
