/** A Pusher protocol frame as a bare WebSocket client receives it. */
export interface Frame {
  event: string;
  channel?: string;
  data?: unknown;
  user_id?: string;
}

/**
 * Parses one received protocol message; `data` is JSON-decoded when it is a string holding
 * JSON (the protocol double-encodes it), and kept as sent otherwise.
 */
export function decodeFrame(text: string): Frame {
  const frame = JSON.parse(text) as Frame;
  if (typeof frame.data === 'string') {
    try {
      frame.data = JSON.parse(frame.data);
    } catch {
      // data as sent
    }
  }
  return frame;
}
