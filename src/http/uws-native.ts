/**
 * Loads uWebSockets.js and checks that the native binary is what loaded. The package
 * silently falls back to a slow pure-JavaScript implementation when the binary does not
 * match the Node ABI; Herald refuses to run (or benchmark) on that fallback unless told to.
 */
import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';

const require = createRequire(import.meta.url);

export type UwsModule = typeof Uws;

/** True when the module's App constructor is a native function, not the JS fallback. */
export function isNativeUws(uws: UwsModule): boolean {
  return /\[native code\]/.test(Function.prototype.toString.call(uws.App));
}

/** Loads uWS; throws when only the fallback is available and `allowFallback` is false. */
export function loadUws(allowFallback: boolean): { uws: UwsModule; native: boolean } {
  const uws = require('uWebSockets.js') as UwsModule;
  const native = isNativeUws(uws);
  if (!native && !allowFallback) {
    throw new Error(
      `uWebSockets.js native binary did not load for node ${process.version} ` +
        `(${process.platform}-${process.arch}, ABI ${process.versions.modules}); only the slow ` +
        'JavaScript fallback is available. Refusing to start. Set "allowUwsFallback": true ' +
        '(or pass --allow-uws-fallback) to run anyway.',
    );
  }
  return { uws, native };
}
