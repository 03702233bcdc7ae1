/**
 * The choice of the uWebSockets.js build (uws-native.ts): HERALD_UWS_MODULE first, then the
 * first installed build whose native binary loads, and a refusal that names every build tried.
 * The builds are real modules on disk: fixtures that fail the way a build without a binary for
 * this runtime fails (the upstream loader throws; the 2023 build hands out its JavaScript
 * fallback), and the installed build that does load here.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isNativeUws, loadUws, UWS_BUILDS, UwsLoadError, type UwsBuild } from '../../../src/http/uws-native.js';

const fixture = (name: string): string => fileURLToPath(new URL(`../../fixtures/${name}`, import.meta.url));

/** The installed build that has a native binary for this runtime, from a path of its own. */
const NATIVE = fixture('uws-module.cjs');
const NO_BINARY = fixture('uws/no-binary.cjs');
const JS_FALLBACK = fixture('uws/js-fallback.cjs');

const CURRENT: UwsBuild = { specifier: NATIVE, name: 'current build', supports: 'Node 20-25, glibc >= 2.38' };
const OLD: UwsBuild = { specifier: NATIVE, name: 'old build', supports: 'Node <= 20, glibc >= 2.27' };
const CURRENT_WITHOUT_BINARY: UwsBuild = { ...CURRENT, specifier: NO_BINARY };
const OLD_WITHOUT_BINARY: UwsBuild = { ...OLD, specifier: JS_FALLBACK };

describe('loadUws', () => {
  it('takes the current build when its binary loads', () => {
    const loaded = loadUws({}, [CURRENT, OLD_WITHOUT_BINARY]);
    expect(loaded.build).toBe('current build');
    expect(loaded.source).toBe(NATIVE);
    expect(isNativeUws(loaded.uws)).toBe(true);
  });

  it('takes the old build when only its binary loads (the current one throws)', () => {
    const loaded = loadUws({}, [CURRENT_WITHOUT_BINARY, OLD]);
    expect(loaded.build).toBe('old build');
    expect(isNativeUws(loaded.uws)).toBe(true);
  });

  it('refuses when no build loads, naming each one, why, and what to install', () => {
    let error: unknown;
    try {
      loadUws({}, [CURRENT_WITHOUT_BINARY, OLD_WITHOUT_BINARY]);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(UwsLoadError);
    const message = (error as Error).message;
    expect(message).toMatch(/^no uWebSockets\.js build loads on Node v\d+/);
    expect(message).toContain("- current build (Node 20-25, glibc >= 2.38): This version of uWS.js (v20.57.0) supports only Node.js versions 20, 22, 24 and 25");
    expect(message).toContain("version `GLIBC_2.38' not found");
    expect(message).toContain('- old build (Node <= 20, glibc >= 2.27): no native binary for this runtime; only its JavaScript fallback loaded');
    expect(message).toContain('Run Node 22 or 24 on glibc >= 2.38');
    expect(message).toContain('HERALD_UWS_MODULE=<package name or path>');
  });

  it('loads what HERALD_UWS_MODULE names before any installed build, and refuses it alone when it fails', () => {
    const named = loadUws({ HERALD_UWS_MODULE: NATIVE }, [OLD_WITHOUT_BINARY]);
    expect(named.source).toBe(NATIVE);
    expect(named.build).toBe(NATIVE);

    // A named build that fails is refused even though an installed one would load.
    expect(() => loadUws({ HERALD_UWS_MODULE: JS_FALLBACK }, [CURRENT])).toThrow(
      `cannot load uWebSockets.js from "${JS_FALLBACK}" (HERALD_UWS_MODULE): no native binary for this runtime`,
    );
    expect(() => loadUws({ HERALD_UWS_MODULE: NO_BINARY }, [CURRENT])).toThrow(/GLIBC_2\.38/);
  });

  it('chooses, among the installed builds, the one this runtime supports', () => {
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;
    const [major, minor] = (glibc ?? '0.0').split('.').map(Number) as [number, number];
    const currentRuns = major > 2 || (major === 2 && minor >= 38);
    const nodeMajor = Number(process.versions.node.split('.')[0]);
    const loaded = loadUws({});
    expect(isNativeUws(loaded.uws)).toBe(true);
    expect(loaded.build).toBe(currentRuns ? UWS_BUILDS[0]!.name : UWS_BUILDS[1]!.name);
    if (nodeMajor > 20) expect(loaded.build).toBe('uWebSockets.js 20.57.0 (@btc-vision/uwebsockets.js)');
  });
});
