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
