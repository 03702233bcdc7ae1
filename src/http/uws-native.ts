/**
 * Loads uWebSockets.js and checks that its native binary is what loaded. The bundled package
 * (@trufflesuite/uws-js-unofficial 20.30.0, installed as `uWebSockets.js`) silently falls back
 * to a pure-JavaScript implementation when no binary matches the Node ABI; that fallback does
 * not implement the API Herald uses (every request answered 500), so Herald refuses to start on
 * it and says what works instead.
 *
 * `HERALD_UWS_MODULE` names another API-compatible build to load instead (a package name, or a
 * path resolved against the current directory): e.g. an upstream uWebSockets.js release for
 * Node 22 or 24.
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
function platformLine(): string {
  const glibc = glibcVersion();
  return (
    `Node ${process.version} (ABI ${process.versions.modules}) on ${process.platform}-${process.arch}` +
    (process.platform === 'linux' ? `, ${glibc ? `glibc ${glibc}` : 'no glibc (musl?)'}` : '')
  );
}

/** What works, and what to install: the text of every refusal. */
const WHAT_WORKS =
  'The bundled build (@trufflesuite/uws-js-unofficial 20.30.0) has native binaries for Node 16, 18 and 20 ' +
  '(ABI 93, 108, 115) on linux x64/arm64/arm with glibc >= 2.27 (not musl/Alpine), macOS x64/arm64 and Windows x64. ' +
  'Either run Node 20, or install an API-compatible uWebSockets.js build for your Node ' +
  '(upstream uNetworking/uWebSockets.js releases have binaries for Node 22 and 24, which need glibc >= 2.38) ' +
  `and point Herald at it: ${UWS_MODULE_ENV}=<package name or path>.`;

/**
 * Loads uWS: the module named by HERALD_UWS_MODULE, or the bundled one. Throws UwsLoadError
 * (with what works and what to install) when it cannot be loaded or is not native.
 */
export function loadUws(env: NodeJS.ProcessEnv = process.env): { uws: UwsModule; source: string } {
  const named = env[UWS_MODULE_ENV]?.trim();
  const source = named ? specifier(named) : 'uWebSockets.js';
  let uws: UwsModule;
  try {
    uws = require(source) as UwsModule;
  } catch (err) {
    throw new UwsLoadError(
      `cannot load uWebSockets.js from "${named ?? source}"${named ? ` (${UWS_MODULE_ENV})` : ''}: ${(err as Error).message}\n` +
        `Running ${platformLine()}. ${WHAT_WORKS}`,
    );
  }
  if (!isNativeUws(uws)) {
    throw new UwsLoadError(
      `uWebSockets.js from "${source}" has no native binary for ${platformLine()}; only its JavaScript ` +
        `fallback loaded, which Herald does not run on. ${WHAT_WORKS}`,
    );
  }
  return { uws, source };
}

function specifier(source: string): string {
  const path = source.startsWith('.') || isAbsolute(source);
  return path ? resolve(source) : source;
}
