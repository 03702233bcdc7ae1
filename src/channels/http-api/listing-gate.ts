/**
 * Bounds what C3 listings (GET /apps/<app_id>/channels) hold on a node. A listing of an app
 * with many occupied channels costs memory in proportion to them, on the shards and on this
 * thread, for as long as it is being built; without a bound, concurrent listings add up (20 of
 * 50,000 channels each took ~300 MB). So at most LISTINGS_BUILDING listings are built at once
 * per node; the others wait their turn, taken round robin across apps, so one app's listings
 * never starve another's. An app with LISTINGS_WAITING_PER_APP listings already waiting gets
 * CHANNEL_LISTING_BUSY (503, Retry-After) at once: a waiting listing holds nothing but its request.
 */
import { HeraldError } from '../../errors.js';

/** Listings built at once per node. */
export const LISTINGS_BUILDING = 2;
/** Listings of one app waiting for their turn, beyond which the app's next is refused. */
export const LISTINGS_WAITING_PER_APP = 32;

export class ListingGate {
  private building = 0;
  /** Waiting listings by app, in arrival order; an app is present only while it has some. */
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(
    private readonly maxBuilding = LISTINGS_BUILDING,
    private readonly maxWaitingPerApp = LISTINGS_WAITING_PER_APP,
  ) {}

  /** Runs `build` for `appId` once a place is free; rejects with CHANNEL_LISTING_BUSY when the app has too many waiting. */
  async run<T>(appId: string, build: () => Promise<T>): Promise<T> {
    if (this.building >= this.maxBuilding) await this.wait(appId);
    else this.building++;
    try {
      return await build();
    } finally {
      this.release();
    }
  }

  private wait(appId: string): Promise<void> {
    let queue = this.waiting.get(appId);
    if (queue && queue.length >= this.maxWaitingPerApp) {
      return Promise.reject(
        new HeraldError('CHANNEL_LISTING_BUSY', `Application ${appId} has ${queue.length} channel listings waiting already; retry in a second`),
      );
    }
    if (!queue) {
      queue = [];
      this.waiting.set(appId, queue);
    }
    const own = queue;
    return new Promise<void>((resolve) => own.push(resolve));
  }

  /** Hands the freed place to the first waiting listing of the next app (round robin), or frees it. */
  private release(): void {
    const next = this.waiting.entries().next();
    if (next.done) {
      this.building--;
      return;
    }
    const [appId, queue] = next.value;
    const start = queue.shift()!;
    // The app goes to the back of the turn order (or leaves it with nothing left waiting).
    this.waiting.delete(appId);
    if (queue.length > 0) this.waiting.set(appId, queue);
    start();
  }
}
