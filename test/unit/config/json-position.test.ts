import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonErrorOffset, lineAndColumn } from '../../../src/config/json-position.js';
import { loadConfig } from '../../../src/config/load.js';

/** `text` with `^` marking where the error is; returns [text, offset]. */
function marked(withCaret: string): [string, number] {
  const at = withCaret.indexOf('^');
  return [withCaret.slice(0, at) + withCaret.slice(at + 1), at];
}

describe('jsonErrorOffset', () => {
  it('points at the first character that makes the text invalid', () => {
    const cases = [
      '{"a": 1,\n ^}',
      '{"a": tru^}',
      '{"a" ^1}',
      '[1, 2^',
      '{"a": "x\\^q"}',
      '{"a": 0^1}',
      '{"a": [1, 2]^]',
      '{"a": "\\u12^G4"}',
      '^',
      '{"a": 1} ^x',
      "{^'a': 1}",
      '{"a": "line^\n"}',
    ];
    for (const c of cases) {
      const [text, offset] = marked(c);
      expect(() => JSON.parse(text), c).toThrow();
      expect(jsonErrorOffset(text), c).toBe(offset);
    }
  });

  it('finds no error in valid JSON', () => {
    for (const text of ['{}', '[]', ' {"a": [1, -2.5e3, true, false, null, "\\u00e9\\n"], "b": {}} ', '"x"', '0']) {
      expect(() => JSON.parse(text)).not.toThrow();
      expect(jsonErrorOffset(text)).toBe(text.length);
    }
  });

  it('gives 1-based lines and columns', () => {
    expect(lineAndColumn('{\n  "a": 1,\n}', 12)).toEqual({ line: 3, column: 1 });
    expect(lineAndColumn('{x', 1)).toEqual({ line: 1, column: 2 });
  });

  it('puts the line and column in the config error', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-json-'));
    try {
      const path = join(dir, 'config.json');
      writeFileSync(path, '{\n  "port": 6001\n  "host": "127.0.0.1"\n}\n');
      expect(() => loadConfig({ configPath: path, env: {} })).toThrow(`config file ${path} is not valid JSON at line 3, column 3:`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
