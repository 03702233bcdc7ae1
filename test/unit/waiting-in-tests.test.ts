/**
 * One way to wait in tests (test/helpers/wait.ts): `until` for a condition, `nextEvent` for an
 * event, `flushedBy` for "nothing (more) arrives", and `sleep` only where time itself is what
 * is tested, each call saying why in a `// time:` comment on its line or the line above. This
 * scans every file under test/ for a wait helper of its own, a hand-rolled sleep, vi.waitFor,
 * and a sleep without its reason.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const TEST_ROOT = resolve(import.meta.dirname, '..');

/** The module that defines the waits, and this file (which names what it looks for). */
const EXEMPT = new Set(['helpers/wait.ts', 'unit/waiting-in-tests.test.ts']);

/** What a wait of a file's own looks like. */
const RULES: { name: string; pattern: RegExp }[] = [
  { name: 'a wait helper of its own', pattern: /(?:function\s+|(?:const|let)\s+|^\s*(?:async\s+)?)(?:sleep|delay|wait|waitFor|waitUntil|until|settled|eventually)\s*(?:=|\(|<)/ },
  { name: 'a hand-rolled sleep', pattern: /new Promise\b[^\n]*\bsetTimeout\(\s*(?:r|res|resolve|done)\s*,/ },
  { name: 'a sleep from node:timers/promises', pattern: /setTimeout as \w+ \} from 'node:timers\/promises'/ },
  { name: 'vi.waitFor', pattern: /\bvi\.waitFor\(/ },
  { name: 'expect.poll', pattern: /\bexpect\.poll\(/ },
  { name: "a page's waitForTimeout", pattern: /\.waitForTimeout\(/ },
  { name: 'a deadline loop of its own', pattern: /(?:\bdeadline\s*=\s*Date\.now\(\)\s*\+|\b(?:while|for)\s*\([^)]*Date\.now\(\))/ },
];

const SLEEP_CALL = /(?<![\w.])sleep\(/;
const TIME_COMMENT = /\/\/ time: \S/;

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'fixtures' ? [] : testFiles(path);
    return /\.(ts|mts|mjs|js)$/.test(entry.name) ? [path] : [];
  });
}

/** `file:line what` for every wait in `text` that is not the one way. */
export function findWaits(file: string, text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  lines.forEach((line, i) => {
    for (const rule of RULES) if (rule.pattern.test(line)) found.push(`${file}:${i + 1} ${rule.name}`);
    if (SLEEP_CALL.test(line) && !TIME_COMMENT.test(line) && !TIME_COMMENT.test(lines[i - 1] ?? '')) {
      found.push(`${file}:${i + 1} a sleep without a // time: comment`);
    }
  });
  return found;
}

describe('waiting in tests', () => {
  it('every file waits through test/helpers/wait.ts, and sleeps only with a reason', () => {
    const found = testFiles(TEST_ROOT)
      .map((path) => relative(TEST_ROOT, path))
      .filter((file) => !EXEMPT.has(file))
      .flatMap((file) => findWaits(file, readFileSync(join(TEST_ROOT, file), 'utf8')));
    expect(found).toEqual([]);
  });

  it('finds each kind of wait it forbids', () => {
    const sample = [
      'const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));',
      'async function waitFor(check: () => boolean) {}',
      "import { setTimeout as sleep } from 'node:timers/promises';",
      'await vi.waitFor(() => expect(x).toBe(1));',
      'await sleep(100);',
      'await expect.poll(() => count()).toBe(2);',
      'await page.waitForTimeout(25);',
      'const deadline = Date.now() + 15_000;',
      'while (x.length === 0 && Date.now() < end) {',
      '// time: the window is what is tested',
      'await sleep(300);',
      'await sleep(50); // time: a rate per second',
    ].join('\n');
    expect(findWaits('f.ts', sample)).toEqual([
      'f.ts:1 a wait helper of its own',
      'f.ts:1 a hand-rolled sleep',
      'f.ts:2 a wait helper of its own',
      'f.ts:3 a sleep from node:timers/promises',
      'f.ts:4 vi.waitFor',
      'f.ts:5 a sleep without a // time: comment',
      "f.ts:6 expect.poll",
      "f.ts:7 a page's waitForTimeout",
      'f.ts:8 a deadline loop of its own',
      'f.ts:9 a deadline loop of its own',
    ]);
  });
});
