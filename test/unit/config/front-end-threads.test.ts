import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../../src/config/load.js';
import { defaultFrontEndThreads, maxFrontEndThreads } from '../../../src/config/front-end-threads.js';

const CLUSTER = { cluster: { redisUrl: 'redis://127.0.0.1:6379' } };

/** The ConfigError that `parse` throws (fails the test when it throws none or another kind). */
function configError(parse: () => unknown): ConfigError {
  try {
    parse();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('no ConfigError thrown');
}

describe('config: frontEndThreads', () => {
  it('takes a whole number from 1 up to what the host can use', () => {
    expect(parseConfig({ frontEndThreads: 1 }).frontEndThreads).toBe(1);
    expect(parseConfig({ frontEndThreads: maxFrontEndThreads() }).frontEndThreads).toBe(maxFrontEndThreads());
  });

  it.each([
    ['0', 0],
    ['-1', -1],
    ['1.5', 1.5],
    ['"2" (a string)', '2'],
    ['null', null],
  ])('refuses %s, naming the field', (_, value) => {
    expect(configError(() => parseConfig({ frontEndThreads: value })).message).toMatch(/invalid config at frontEndThreads: must be a whole number from 1 up/);
  });

  it('refuses more threads than the host can use (its CPUs, at least 2, at most 32), naming the field and the limit', () => {
    const max = maxFrontEndThreads();
    expect(max).toBeGreaterThanOrEqual(2);
    expect(max).toBeLessThanOrEqual(32);
    const message = configError(() => parseConfig({ frontEndThreads: max + 1 })).message;
    expect(message).toMatch(/invalid config at frontEndThreads/);
    expect(message).toContain(`at most ${max}`);
    expect(maxFrontEndThreads(1)).toBe(2);
    expect(maxFrontEndThreads(16)).toBe(16);
    expect(maxFrontEndThreads(128)).toBe(32);
  });

  it('with a cluster block: 1 by default, and more when set', () => {
    expect(parseConfig(CLUSTER).frontEndThreads).toBe(1);
    expect(parseConfig({ ...CLUSTER, frontEndThreads: 1 }).frontEndThreads).toBe(1);
    expect(parseConfig({ ...CLUSTER, frontEndThreads: 2 }).frontEndThreads).toBe(2);
  });

  it('without one: the default of this host', () => {
    expect(parseConfig({}).frontEndThreads).toBe(defaultFrontEndThreads());
  });

  it('HERALD_FRONT_END_THREADS sets it; a value that is not an integer is an error naming the variable', () => {
    expect(loadConfig({ env: { HERALD_FRONT_END_THREADS: '2' } }).frontEndThreads).toBe(2);
    expect(configError(() => loadConfig({ env: { HERALD_FRONT_END_THREADS: 'abc' } })).message).toMatch(/HERALD_FRONT_END_THREADS must be an integer, got "abc"/);
    expect(configError(() => loadConfig({ env: { HERALD_FRONT_END_THREADS: '0' } })).message).toMatch(/invalid config at frontEndThreads/);
  });
});

describe('defaultFrontEndThreads(cpus, platform)', () => {
  it.each([
    [2, 1],
    [4, 1],
    [7, 1],
    [8, 2],
    [16, 4],
    [64, 16],
    [128, 16],
  ])('on Linux with %i CPUs: %i', (cpus, threads) => {
    expect(defaultFrontEndThreads(cpus, 'linux')).toBe(threads);
  });

  it('1 off Linux, whatever the CPUs (SO_REUSEPORT does not spread connections there)', () => {
    expect(defaultFrontEndThreads(16, 'darwin')).toBe(1);
    expect(defaultFrontEndThreads(16, 'win32')).toBe(1);
  });

  it('1 on a single CPU', () => {
    expect(defaultFrontEndThreads(1, 'linux')).toBe(1);
  });
});
