/**
 * Chooses and loads the uWebSockets.js build Herald runs on. Two builds are installed, because
 * no single one covers every supported runtime:
 *
 * - `uWebSockets.js` (@btc-vision/uwebsockets.js 20.57.0, upstream uWebSockets.js v20.57
 *   binaries): Node 20, 22, 24 and 25 on linux x64/arm64, macOS and Windows; on Linux it needs
 *   glibc >= 2.38 (Debian 13, Ubuntu 24.04, RHEL 10). Herald's types are this build's.
 * - `@trufflesuite/uws-js-unofficial` 20.30.0 (2023): Node 16, 18 and 20 on glibc >= 2.27
 *   (Debian 12, Ubuntu 22.04, RHEL 9). It silently falls back to a pure-JavaScript
 *   implementation when no binary matches; that fallback does not implement the API Herald uses
 *   (every request answered 500), so it counts as not loading.
 *
 * `HERALD_UWS_MODULE` (a package name, or a path resolved against the current directory) names
 * the one build to load and wins over the automatic choice; otherwise the first of the builds
 * above whose native binary loads here is used. When none does, the refusal lists each build and
 * why it did not load, and what to install.
 */
import { createRequire } from 'node:module';
import { isAbsolute, resolve } from 'node:path';
import type * as Uws from 'uWebSockets.js';

export type UwsModule = typeof Uws;

/** Packages resolve from Herald's own install; paths against the current directory. */
const require = createRequire(import.meta.url);

export const UWS_MODULE_ENV = 'HERALD_UWS_MODULE';

export class UwsLoadError extends Error {
  override readonly name = 'UwsLoadError';
}

/** One installed uWebSockets.js build Herald may choose. */
export interface UwsBuild {
  /** What `require` is given: a package name or an absolute path. */
  readonly specifier: string;
  /** Its name in logs, `herald_build_info` and refusals, e.g. 'uWebSockets.js 20.57.0'. */
  readonly name: string;
  /** Where its native binaries run. */
  readonly supports: string;
}

/** The installed builds, in the order they are tried. */
export const UWS_BUILDS: readonly UwsBuild[] = [
  {
    specifier: 'uWebSockets.js',
    name: 'uWebSockets.js 20.57.0 (@btc-vision/uwebsockets.js)',
    supports: 'Node 20, 22, 24 and 25; on Linux glibc >= 2.38 (x64, arm64), not musl',
  },
  {
    specifier: '@trufflesuite/uws-js-unofficial',
    name: 'uWebSockets.js 20.30.0 (@trufflesuite/uws-js-unofficial)',
    supports: 'Node 16, 18 and 20 (ABI 93, 108, 115); on Linux glibc >= 2.27 (x64, arm64, arm), not musl',
  },
];

/** The build that loaded. */
export interface LoadedUws {
  readonly uws: UwsModule;
  /** The build's name (UWS_BUILDS), or the resolved HERALD_UWS_MODULE. */
  readonly build: string;
  /** What was loaded: the package name or the resolved path. */
  readonly source: string;
}

/** True when the module's App constructor is a native function, not the JS fallback. */
export function isNativeUws(uws: UwsModule): boolean {
  return typeof uws?.App === 'function' && /\[native code\]/.test(Function.prototype.toString.call(uws.App));
}

/** The C library version this Node runs on ('2.36'), or null (musl, macOS, Windows). */
function glibcVersion(): string | null {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ?? null;
}

/** Where this process runs, in the terms the refusal uses. */
export function platformLine(): string {
  const glibc = glibcVersion();
  return (
    `Node ${process.version} (ABI ${process.versions.modules}) on ${process.platform}-${process.arch}` +
    (process.platform === 'linux' ? `, ${glibc ? `glibc ${glibc}` : 'no glibc (musl?)'}` : '')
  );
}

/** What works, and what to install: the end of every refusal. */
const WHAT_WORKS =
  'Run Node 22 or 24 on glibc >= 2.38 (Debian 13, Ubuntu 24.04, RHEL 10), or Node 20 on an older glibc (>= 2.27); ' +
  'musl (Alpine) is not supported. Reinstall the dependencies (npm ci) if a build is missing, or install an ' +
  `API-compatible uWebSockets.js build for your Node and point Herald at it: ${UWS_MODULE_ENV}=<package name or path>.`;

/** Why a module did not load, or null when it loaded with its native binary. */
function tryLoad(specifier: string): { uws: UwsModule } | { reason: string } {
  let uws: UwsModule;
  try {
    uws = require(specifier) as UwsModule;
  } catch (err) {
    return { reason: (err as Error).message.replace(/\s+/g, ' ').trim() };
  }
  if (!isNativeUws(uws)) return { reason: 'no native binary for this runtime; only its JavaScript fallback loaded, which Herald does not run on' };
  return { uws };
}

/**
 * Loads uWS: the module named by HERALD_UWS_MODULE, or else the first of `builds` whose native
 * binary loads. Throws UwsLoadError (each build tried and why it failed, what works and what to
 * install) when none does.
 */
export function loadUws(env: NodeJS.ProcessEnv = process.env, builds: readonly UwsBuild[] = UWS_BUILDS): LoadedUws {
  const named = env[UWS_MODULE_ENV]?.trim();
  if (named) {
    const source = specifier(named);
    const loaded = tryLoad(source);
    if ('uws' in loaded) return { uws: loaded.uws, build: source, source };
    throw new UwsLoadError(
      `cannot load uWebSockets.js from "${named}" (${UWS_MODULE_ENV}): ${loaded.reason}\n` + `Running ${platformLine()}. ${WHAT_WORKS}`,
    );
  }
  const failures: string[] = [];
  for (const build of builds) {
    const loaded = tryLoad(build.specifier);
    if ('uws' in loaded) return { uws: loaded.uws, build: build.name, source: build.specifier };
    failures.push(`- ${build.name} (${build.supports}): ${loaded.reason}`);
  }
  throw new UwsLoadError(
    `no uWebSockets.js build loads on ${platformLine()}:\n${failures.join('\n')}\n${WHAT_WORKS}`,
  );
}

function specifier(source: string): string {
  const path = source.startsWith('.') || isAbsolute(source);
  return path ? resolve(source) : source;
}
