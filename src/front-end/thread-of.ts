/**
 * The front-end thread that holds a socket: a socket id is `a.b` with `a = random × 64 + thread`.
 * TODO(lead): the same rule as `threadOf` in channels/socket-id.ts; use that one once merged.
 */
export function threadOfSocketId(socketId: string): number {
  const dot = socketId.indexOf('.');
  const first = Number.parseInt(dot < 0 ? socketId : socketId.slice(0, dot), 10);
  return Number.isFinite(first) ? first % 64 : -1;
}
