/**
 * What the README and docs/ say Herald has or lacks agrees with the code. Each capability below
 * is read from the sources (the config schema, the route tables, pusher-js' own transport
 * list); a doc sentence that denies one the code has, or a client snippet that switches it off,
 * fails here instead of sending a reader the wrong way.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { appSchema, configSchema } from '../../src/config/schema.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** Each paragraph, table row and code line of every doc, with its file, its lines joined. */
function passages(): { file: string; text: string }[] {
  const out: { file: string; text: string }[] = [];
  for (const file of DOCS) {
    for (const chunk of read(file).split(/\n\s*\n/)) {
      // Table rows and code lines stand alone; prose lines of one paragraph join.
      const rows = chunk.split('\n').some((line) => line.startsWith('|') || line.startsWith('```')) ? chunk.split('\n') : [chunk.replace(/\n/g, ' ')];
      for (const text of rows) out.push({ file, text });
    }
  }
  return out;
}

/** Passages matching any of `denials`, as `file: text` lines. */
function denying(denials: RegExp[]): string[] {
  return passages()
    .filter(({ text }) => denials.some((d) => d.test(text)))
    .map(({ file, text }) => `${file}: ${text.trim().slice(0, 200)}`);
}

/** The HTTP fallback routes the endpoint registers, as pusher-js names their transports. */
function servedFallbackTransports(): string[] {
  const source = read('src/channels/http-fallback/routes.ts');
  const routes = new Set([...source.matchAll(/app\.post\(`\$\{base\}\/(\w+)`/g)].map((m) => m[1]!));
  const served: string[] = [];
  if (routes.has('xhr_streaming')) served.push('xhr_streaming');
  if (routes.has('xhr')) served.push('xhr_polling');
  return served;
}

/** pusher-js' transport names, from its own type declarations. */
function pusherJsTransports(): string[] {
  const types = read('node_modules/pusher-js/types/src/core/config.d.ts');
  const union = /export type Transport = ([^;]+);/.exec(types)![1]!;
  return [...union.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
}

describe('transports', () => {
  const fallback = servedFallbackTransports();
  const fallbackOnByDefault = configSchema.parse({}).httpFallback.enabled;

  it('the code serves the HTTP fallback, on by default (what the rest of this block relies on)', () => {
    expect(fallback).toEqual(['xhr_streaming', 'xhr_polling']);
    expect(fallbackOnByDefault).toBe(true);
  });

  it('no doc says Herald lacks the HTTP fallback transports', () => {
    expect(
      denying([
        /\bHerald (has|serves|offers|supports) no HTTP fallback/i,
        /\b(does not|doesn't|cannot|can't) (have|serve|support|offer)\b[^.|]*\b(HTTP fallback|xhr_streaming|xhr_polling)\b/i,
        /\b(HTTP fallback|xhr_streaming|xhr_polling)\b[^.|]*\b(not supported|unsupported|not served)\b/i,
      ]),
    ).toEqual([]);
  });

  it("every enabledTransports in the docs names pusher-js transports Herald serves, and one that reaches for the fallback names both", () => {
    const known = pusherJsTransports();
    const served = new Set(['ws', 'wss', ...fallback]);
    const wrong: string[] = [];
    for (const file of DOCS) {
      for (const m of read(file).matchAll(/enabledTransports:\s*\[([^\]]*)\]/g)) {
        const names = [...m[1]!.matchAll(/'(\w+)'/g)].map((n) => n[1]!);
        for (const name of names) {
          if (!known.includes(name)) wrong.push(`${file}: ${name} is not a pusher-js transport`);
          else if (!served.has(name)) wrong.push(`${file}: ${name} is not served by Herald`);
        }
        const withFallback = names.filter((n) => fallback.includes(n));
        if (withFallback.length > 0 && withFallback.length < fallback.length) wrong.push(`${file}: [${names.join(', ')}] enables only part of the HTTP fallback`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the SDK guide keeps the fallback on in every pusher-js and Echo snippet that sets httpHost', () => {
    const sdks = read('docs/sdks.md');
    const snippets = [...sdks.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((s) => s.includes('wsHost'));
    expect(snippets.length).toBeGreaterThanOrEqual(2);
    for (const snippet of snippets) {
      expect(snippet).toContain('httpHost');
      for (const transport of fallback) expect(snippet).toContain(`'${transport}'`);
    }
  });
});

describe('rate limits', () => {
  const perSecond = Object.keys(appSchema.shape).filter((name) => /PerSecond/.test(name));

  it('the app schema has per-second limits of HTTP requests, events and new connections', () => {
    expect(perSecond).toEqual(expect.arrayContaining(['maxHttpRequestsPerSecond', 'maxEventsPerSecond', 'maxNewConnectionsPerSecond', 'maxNewConnectionsPerSecondPerIp']));
  });

  it('no doc says there is no per-second limit', () => {
    expect(denying([/\bno per-second\b[^.|]*\blimit/i, /\b(no|without an?) (HTTP|request) rate limit/i])).toEqual([]);
  });

  it('the soketi guide maps soketi\'s per-second limits to the fields that exist', () => {
    const soketi = read('docs/migrating-from-soketi.md');
    for (const field of ['maxHttpRequestsPerSecond', 'maxEventsPerSecond']) {
      expect(perSecond).toContain(field);
      expect(soketi).toContain(`apps[].${field}`);
    }
  });
});

describe('app management', () => {
  const tenantRoutes = read('src/admin/tenant-routes.ts');
  const manages = (method: string, path: string): boolean => tenantRoutes.includes(`['${method}', '${path}'`);

  it('the admin API creates, changes and deletes apps at run time', () => {
    expect(manages('post', '/admin/v1/apps')).toBe(true);
    expect(manages('patch', '/admin/v1/apps/:appId')).toBe(true);
    expect(manages('del', '/admin/v1/apps/:appId')).toBe(true);
  });

  it('no doc says apps can only live in the config file or cannot be managed at run time', () => {
    expect(
      denying([
        /\bapps live (only )?in the config file/i,
        /\b(cannot|can't|can not)\b[^.|]*\b(create|manage|add|change)\b[^.|]*\bapps?\b[^.|]*\bat run ?time/i,
        /\bapps?\b[^.|]*\b(cannot|can't|can not) be (created|managed|added|changed)\b[^.|]*\bat run ?time/i,
        /\bnot supported: apps\b/i,
      ]),
    ).toEqual([]);
  });
});
