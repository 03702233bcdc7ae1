/** The latest `limit` ids added (publish ids a shard must remember for a while), oldest forgotten first. */
export class RecentIds {
  private readonly ids = new Set<string>();

  constructor(private readonly limit: number) {}

  add(id: string): void {
    this.ids.add(id);
    if (this.ids.size > this.limit) this.ids.delete(this.ids.values().next().value!);
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  /** Forgets `id`; true when it was remembered. */
  delete(id: string): boolean {
    return this.ids.delete(id);
  }
}
