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
