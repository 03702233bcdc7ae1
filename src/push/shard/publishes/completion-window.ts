/**
 * The sends of one publish between its durable checkpoint and the scan's read position, in
 * scan order. Sends finish out of order; only the longest finished prefix may be checkpointed,
 * because a restart resumes the scan after the checkpoint position. So a slot is pushed when
 * its device is read, marked done when its send settles, and `takeCommitted()` pops the done
 * prefix (the part that can be counted and checkpointed). Its size is what a crash can send
 * twice beyond the checkpoint interval, so the runner bounds it.
 */
export class CompletionWindow<T> {
  private slots: ({ value: T; done: boolean } | undefined)[] = [];
  private head = 0;

  /** Slots pushed and not yet taken. */
  get size(): number {
    return this.slots.length - this.head;
  }

  /** Appends a pending slot; call `complete` with the returned handle when its send settles. */
  push(value: T): { value: T; done: boolean } {
    const slot = { value, done: false };
    this.slots.push(slot);
    return slot;
  }

  /** Marks a slot done (it stays in place until every earlier slot is done too). */
  complete(slot: { done: boolean }): void {
    slot.done = true;
  }

  /** Pops and returns the done slots at the front, in order. */
  takeCommitted(): T[] {
    const out: T[] = [];
    while (this.head < this.slots.length) {
      const slot = this.slots[this.head]!;
      if (!slot.done) break;
      out.push(slot.value);
      this.slots[this.head] = undefined;
      this.head++;
    }
    // Compact once the taken prefix dominates, so memory follows the live size.
    if (this.head > 1024 && this.head * 2 > this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.head = 0;
    }
    return out;
  }
}
