/** uSockets' listen options and the listen form uWS.js does not type, for every listener Herald opens. */
import type { us_listen_socket } from 'uWebSockets.js';

/** uSockets' listen option: without it the listen socket has SO_REUSEPORT (ports shared silently). */
export const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;
/** uSockets' listen option without LIBUS_LISTEN_EXCLUSIVE_PORT: SO_REUSEPORT. */
export const LIBUS_LISTEN_DEFAULT = 0;

/** uWS.js types only the (port, options, cb) form; the binary also takes (host, port, options, cb). */
export type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => unknown;
