import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { configSchema } from '../../../src/config/schema.js';

const docs = readFileSync(join(import.meta.dirname, '../../../docs/configuration.md'), 'utf8');

/** Every field name of the schema, nested objects and arrays of objects included. */
function fieldNames(schema: z.ZodType, out = new Set<string>()): Set<string> {
  const def = (schema as unknown as { def: { type: string; innerType?: z.ZodType; element?: z.ZodType; shape?: Record<string, z.ZodType> } }).def;
  if (def.type === 'object') {
    for (const [name, child] of Object.entries(def.shape!)) {
      out.add(name);
      fieldNames(child, out);
    }
  } else if (def.innerType) {
    fieldNames(def.innerType, out);
  } else if (def.element) {
    fieldNames(def.element, out);
  }
  return out;
}

describe('docs/configuration.md', () => {
  it('documents every config field', () => {
    const names = [...fieldNames(configSchema)];
    expect(names.length).toBeGreaterThan(40);
    const undocumented = names.filter((name) => !docs.includes(`\`${name}\``));
    expect(undocumented).toEqual([]);
  });
});

describe('environment variables', () => {
  it('every HERALD_* variable the code reads is in the README and docs/configuration.md', async () => {
    const { readdirSync } = await import('node:fs');
    const root = join(import.meta.dirname, '../../../');
    const names = new Set<string>();
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        else if (e.name.endsWith('.ts')) for (const m of readFileSync(path, 'utf8').matchAll(/\bHERALD_[A-Z_]+\b/g)) names.add(m[0]);
      }
    };
    walk(join(root, 'src'));
    expect(names.size).toBeGreaterThan(5);
    // Test-only variables are the tests' business: in test/README.md, not in what an operator reads.
    const testsDoc = readFileSync(join(root, 'test/README.md'), 'utf8');
    const testOnly = [...names].filter((n) => /^HERALD_(TEST_|RESHARD_|PUSH_TO_POSTGRES_)/.test(n));
    expect(testOnly).toContain('HERALD_TEST_HOOKS');
    const operators = [...names].filter((n) => !testOnly.includes(n));
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(operators.filter((n) => !readme.includes(n))).toEqual([]);
    expect(operators.filter((n) => !docs.includes(n))).toEqual([]);
    expect(testOnly.filter((n) => !testsDoc.includes(n))).toEqual([]);
    expect(testOnly.filter((n) => readme.includes(n) || docs.includes(n))).toEqual([]);
  });
});
