/**
 * A Map of tenants by id that also keeps its ids sorted, so that a page of the admin API's lists
 * (the overview, `GET /admin/v1/apps`) is a binary search and `limit` entries, not a sort of
 * every tenant per request. Every writer of the map (start-up, reload, the tenant registry)
 * keeps the order by using it as a Map: `set` of a new id inserts it in place (appended when ids
 * come in order, as generated ones do), `delete` takes it out.
 */

/** What readers of an IdOrderedMap use: a ReadonlyMap that pages in id order. */
export interface ReadonlyIdOrderedMap<V> extends ReadonlyMap<string, V> {
  /**
   * Entries in id order after `cursor` (from the first when undefined), up to `limit`, whose
   * value `matches` (all when absent); `nextCursor` is the last id of the page when more match
   * after it, else null. Without `matches` the cost is a binary search and `limit` entries.
   */
  pageAfter(cursor: string | undefined, limit: number, matches?: (value: V) => boolean): { items: V[]; nextCursor: string | null };
}

export class IdOrderedMap<V> extends Map<string, V> implements ReadonlyIdOrderedMap<V> {
  /** The keys, sorted by code unit (as `<` compares strings). */
  private sorted: string[] = [];

  constructor(entries?: Iterable<readonly [string, V]>) {
    super();
    if (entries) for (const [id, value] of entries) this.set(id, value);
  }

  override set(id: string, value: V): this {
    if (!this.has(id)) {
      const last = this.sorted[this.sorted.length - 1];
      if (last === undefined || last < id) this.sorted.push(id);
      else this.sorted.splice(this.firstAfter(id, true), 0, id);
    }
    return super.set(id, value);
  }

  override delete(id: string): boolean {
    if (!super.delete(id)) return false;
    this.sorted.splice(this.firstAfter(id, true), 1);
    return true;
  }

  override clear(): void {
    super.clear();
    this.sorted = [];
  }

  pageAfter(cursor: string | undefined, limit: number, matches?: (value: V) => boolean): { items: V[]; nextCursor: string | null } {
    const items: V[] = [];
    let lastId: string | null = null;
    for (let i = cursor === undefined ? 0 : this.firstAfter(cursor, false); i < this.sorted.length; i++) {
      const id = this.sorted[i]!;
      const value = this.get(id)!;
      if (matches && !matches(value)) continue;
      if (items.length === limit) return { items, nextCursor: lastId };
      items.push(value);
      lastId = id;
    }
    return { items, nextCursor: null };
  }

  /** The index of the first id above `id` (or, `orEqual`, the first not below it). */
  private firstAfter(id: string, orEqual: boolean): number {
    let low = 0;
    let high = this.sorted.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const at = this.sorted[mid]!;
      if (at < id || (!orEqual && at === id)) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}
