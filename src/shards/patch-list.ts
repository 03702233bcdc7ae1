/** Replacing a few entries of a config list (apps, push instances) by id; used on both sides of the shard boundary. */
/** `list` with the entries of `upserts` replaced or appended and those ids in `removed` left out (by `idOf`). */
export function patchList<T>(list: readonly T[], idOf: (item: T) => string, upserts: readonly T[], removed: readonly string[]): T[] {
  if (upserts.length === 0 && removed.length === 0) return list as T[];
  const byId = new Map(upserts.map((u) => [idOf(u), u]));
  const gone = new Set(removed);
  const out: T[] = [];
  for (const item of list) {
    const id = idOf(item);
    if (gone.has(id)) continue;
    const next = byId.get(id);
    out.push(next ?? item);
    byId.delete(id);
  }
  out.push(...byId.values());
  return out;
}
