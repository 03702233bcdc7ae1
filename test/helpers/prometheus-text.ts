/** Parses the Prometheus text format into `name{label="v",...}` → value (labels as printed). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$/.exec(line);
    if (m) out.set(m[1]! + (m[2] ?? ''), Number(m[3]));
  }
  return out;
}

/** The value of a series whose name is `name` and whose labels include every one given; 0 when absent. */
export function series(metrics: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, value] of metrics) {
    const brace = key.indexOf('{');
    const keyName = brace < 0 ? key : key.slice(0, brace);
    if (keyName !== name) continue;
    if (Object.entries(labels).every(([k, v]) => key.includes(`${k}="${v}"`))) total += value;
  }
  return total;
}
