import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLOSE_CODES, ERROR_CATALOGUE, HeraldError, channelErrorBody, pushErrorBody } from '../../src/errors.js';

const docs = readFileSync(join(import.meta.dirname, '../../docs/errors.md'), 'utf8');

describe('error catalogue', () => {
  it('documents every code in docs/errors.md', () => {
    const undocumented = Object.keys(ERROR_CATALOGUE).filter((code) => !docs.includes(`\`${code}\``));
    expect(undocumented).toEqual([]);
  });

  it('documents every WebSocket close code', () => {
    const missing = Object.values(CLOSE_CODES).filter((code) => !docs.includes(`| ${code} |`));
    expect(missing).toEqual([]);
  });

  it('documents no 4xxx close code Herald does not send', () => {
    const documented = [...docs.matchAll(/^\| (4\d{3}) \|/gm)].map((m) => Number(m[1]));
    const sent = new Set<number>(Object.values(CLOSE_CODES));
    expect(documented.filter((code) => !sent.has(code))).toEqual([]);
  });

  it('uses only real HTTP error statuses', () => {
    for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
      expect(entry.status, code).toBeGreaterThanOrEqual(400);
      expect(entry.status, code).toBeLessThan(600);
    }
  });

  it('builds both body shapes from one error', () => {
    const err = new HeraldError('DEVICE_NOT_FOUND', 'Device apns-1 not found');
    expect(err.status).toBe(404);
    expect(JSON.parse(pushErrorBody(err))).toEqual({ error: 'Device not found', description: 'Device apns-1 not found' });
    expect(JSON.parse(channelErrorBody(err))).toEqual({ error: 'Device apns-1 not found', code: 'DEVICE_NOT_FOUND' });
  });
});
