/**
 * One connection's channels (channel name → what the main thread believes about it), with the
 * part of the Map API the WebSocket code uses. Most connections hold one channel, so the first is
 * kept in two fields and a Map is made only for a second: a Map costs ~185 B even empty (the
 * object and a hash table for 4 entries), this ~50 B, which is ~135 B less per connection.
 *
 * Deleting while iterating is safe (as with a Map); an entry added while iterating may or may
 * not be visited.
 */
export class SocketChannels<V> {
  private firstName: string | undefined = undefined;
  private first: V | undefined = undefined;
  /** Every other channel; null until a connection holds two at once. */
  private rest: Map<string, V> | null = null;

  get size(): number {
    return (this.firstName === undefined ? 0 : 1) + (this.rest?.size ?? 0);
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

  *[Symbol.iterator](): Generator<[string, V], void, undefined> {
    if (this.firstName !== undefined) yield [this.firstName, this.first as V];
    const rest = this.rest;
    if (rest) yield* rest;
  }
}
