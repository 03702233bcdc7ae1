/** The admin API of a test Herald: a request with its bearer token, a JSON body when given. */
export interface AdminRequest {
  method?: string;
  body?: unknown;
}

/** `<baseUrl>/admin/v1<path>` with `Authorization: Bearer <token>`; `body` sent as JSON. */
export function adminRequest(baseUrl: string, token: string, path: string, init: AdminRequest = {}): Promise<Response> {
  return fetch(`${baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${token}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

/** One server-sent event of the admin API's live stream. */
export interface StreamEvent {
  type: string;
  data: Record<string, unknown>;
}

/**
 * Reads a live stream's answer as the dashboard does: each `event:` / `data:` block is pushed
 * to `events` as it arrives; `ended` settles when the stream ends or is aborted.
 */
export function readEventStream(res: Response): { events: StreamEvent[]; ended: Promise<void> } {
  const events: StreamEvent[] = [];
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const type = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (type && data) events.push({ type, data: JSON.parse(data) as Record<string, unknown> });
        }
      }
    } catch {
      // aborted
    }
  })();
  return { events, ended };
}
