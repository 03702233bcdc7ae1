/**
 * `node dist/bench/profile-summary.js <file.cpuprofile> [top]`: the hottest functions of a V8
 * CPU profile (as written by `npm run bench:fanout -- --cpu-prof`), by self time and by total
 * (inclusive) time, so a missed target can be traced to code without opening DevTools.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node dist/bench/profile-summary.js <file.cpuprofile> [top]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function label(n: ProfileNode): string {
  const url = n.callFrame.url.replace(/^file:\/\//, '');
  const where = url ? `${relative(process.cwd(), url)}:${n.callFrame.lineNumber + 1}` : '';
  return `${n.callFrame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
}

const selfUs = new Map<string, number>();
const totalUs = new Map<string, number>();
let allUs = 0;
let idleUs = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  allUs += dt;
  const node = byId.get(id)!;
  if (node.callFrame.functionName === '(idle)') idleUs += dt;
  selfUs.set(label(node), (selfUs.get(label(node)) ?? 0) + dt);
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const l = label(byId.get(at)!);
    if (seen.has(l)) continue;
    seen.add(l);
    totalUs.set(l, (totalUs.get(l) ?? 0) + dt);
  }
});

const busyUs = allUs - idleUs;
const print = (title: string, map: Map<string, number>): void => {
  process.stdout.write(`\n${title} (% of busy time)\n`);
  [...map.entries()]
    .filter(([l]) => !l.startsWith('(idle)') && !l.startsWith('(root)'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .forEach(([l, us]) => process.stdout.write(`${((us / busyUs) * 100).toFixed(1).padStart(6)}%  ${l}\n`));
};
process.stdout.write(`${file}\nprofiled ${(allUs / 1e6).toFixed(1)} s, busy ${(busyUs / 1e6).toFixed(1)} s\n`);
print('self time', selfUs);
print('total time', totalUs);
