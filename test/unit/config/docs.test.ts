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
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect([...names].filter((n) => !readme.includes(n))).toEqual([]);
    expect([...names].filter((n) => !docs.includes(n))).toEqual([]);
  });
});
