/**
 * Notices a shard posts to every attached front-end thread outside any request (front-end
 * ports, front-end-ports.ts): each thread gets them in the order the shard posts them. A
 * history channel's kept events go out this way when several front-end threads serve, so that
 * every thread delivers them in serial order whichever thread appended them.
 */

/** A notice: its `type` names what it is; the rest is the area's. */
export interface ShardNotice {
  type: string;
}

let post: ((notice: ShardNotice) => void) | null = null;
let attached: () => boolean = () => false;

/** Set once by the shard runtime (worker.ts). */
export function setFrontEndNotices(poster: (notice: ShardNotice) => void, anyAttached: () => boolean): void {
  post = poster;
  attached = anyAttached;
}

/** Whether front-end threads are attached (several serve the port). */
export function frontEndsAttached(): boolean {
  return attached();
}

/** Posts the notice to every attached front end. */
export function noticeFrontEnds(notice: ShardNotice): void {
  post?.(notice);
}
