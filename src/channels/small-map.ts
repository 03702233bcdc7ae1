/**
 * A string-keyed map for the many maps that usually hold one entry, with the part of the Map
 * API they use: a connection's channels on the main thread (most connections hold one) and a
 * channel's subscribers on its shard (many channels have one). The first entry is kept in two
 * fields and a Map is made only for a second: a Map costs ~185 B even empty (the object and a
 * hash table for 4 entries), this ~50 B, which is ~135 B less per connection or channel.
 *
 * Deleting while iterating is safe (as with a Map); an entry added while iterating may or may
 * not be visited.
 */
export class SmallMap<V> {
  private firstName: string | undefined = undefined;
  private first: V | undefined = undefined;
  /** Every other channel; null until a connection holds two at once. */
  private rest: Map<string, V> | null = null;

  get size(): number {
    return (this.firstName === undefined ? 0 : 1) + (this.rest?.size ?? 0);
  }

  has(name: string): boolean {
    return name === this.firstName || (this.rest?.has(name) ?? false);
  }

  get(name: string): V | undefined {
    return name === this.firstName ? this.first : this.rest?.get(name);
  }

  set(name: string, value: V): this {
    if (name === this.firstName) {
      this.first = value;
    } else if (this.firstName === undefined && !this.rest?.has(name)) {
      this.firstName = name;
      this.first = value;
    } else {
      (this.rest ??= new Map()).set(name, value);
    }
    return this;
  }

  delete(name: string): boolean {
    if (name === this.firstName) {
      this.firstName = undefined;
      this.first = undefined;
      return true;
    }
    const rest = this.rest;
    if (!rest?.delete(name)) return false;
    // A live iteration keeps its own reference to the Map.
    if (rest.size === 0) this.rest = null;
    return true;
  }

  *keys(): Generator<string, void, undefined> {
    for (const [name] of this) yield name;
  }

  *[Symbol.iterator](): Generator<[string, V], void, undefined> {
    if (this.firstName !== undefined) yield [this.firstName, this.first as V];
    const rest = this.rest;
    if (rest) yield* rest;
  }
}
