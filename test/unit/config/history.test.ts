import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';

const APP = { id: 'h-app', key: 'h-key', secret: 'h-secret' };

describe('config: apps[].history and apps[].maxHistoryBytes', () => {
  it('are off and 64 MiB by default', () => {
    const app = parseConfig({ apps: [APP] }).apps[0]!;
    expect(app.history).toBeNull();
    expect(app.maxHistoryBytes).toBe(64 * 1024 * 1024);
  });

  it('take channel patterns with maxEvents and ttlSeconds defaults', () => {
    const app = parseConfig({ apps: [{ ...APP, history: { channels: ['history-*', 'private-history-*'] } }] }).apps[0]!;
    expect(app.history).toEqual({ channels: ['history-*', 'private-history-*'], maxEvents: 100, ttlSeconds: 300 });
  });

  it('refuse bad values, naming the field', () => {
    const bad = (history: unknown): (() => unknown) => () => parseConfig({ apps: [{ ...APP, history }] });
    expect(bad({ channels: [] })).toThrow(/apps\.0\.history\.channels/);
    expect(bad({ channels: ['*'] })).toThrow(/apps\.0\.history\.channels\.0/);
    expect(bad({ channels: ['bad pattern'] })).toThrow(/apps\.0\.history\.channels\.0/);
    expect(bad({ channels: ['h-*'], maxEvents: 0 })).toThrow(/apps\.0\.history\.maxEvents/);
    expect(bad({ channels: ['h-*'], ttlSeconds: 1.5 })).toThrow(/apps\.0\.history\.ttlSeconds/);
    expect(bad({ channels: ['h-*'], other: 1 })).toThrow(/apps\.0\.history/);
    expect(() => parseConfig({ apps: [{ ...APP, maxHistoryBytes: -1 }] })).toThrow(/apps\.0\.maxHistoryBytes/);
  });

  it('is accepted in a cluster (kept in Redis there)', () => {
    const config = { cluster: { redisUrl: 'redis://127.0.0.1:1' }, apps: [APP, { ...APP, id: 'h2', key: 'h2', history: { channels: ['h-*'] } }] };
    expect(parseConfig(config).apps[1]!.history).toEqual({ channels: ['h-*'], maxEvents: 100, ttlSeconds: 300 });
  });
});
