/**
 * Opening the port: alone by default, shared (SO_REUSEPORT) with `reusePort`, with a TLS
 * certificate handover, or with several front-end threads.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import type { us_listen_socket } from 'uWebSockets.js';
import type { UwsModule } from './uws-native.js';
import { LIBUS_LISTEN_DEFAULT, LIBUS_LISTEN_EXCLUSIVE_PORT, type ListenWithOptions } from './uws-listen.js';

/** Thrown when the port cannot be had; the CLI prints the message alone. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
}

/**
 * Listens on host:port; by default alone (a port in use fails), with `reusePort` shared with
 * other processes that also ask for it. `shareable` (TLS, several front-end threads): opened with
 * SO_REUSEPORT even without `reusePort`, so that another listener can open beside it; the port is
 * then first checked free with a listener that does not share (a port in use still fails).
 */
export async function listen(app: ReturnType<UwsModule['App']>, host: string, port: number, reusePort: boolean, shareable = false): Promise<us_listen_socket> {
  const at = shareable && !reusePort ? await claimPort(host, port) : port;
  return listenOn(app, host, at, { reusePort, shared: reusePort || shareable });
}

/**
 * Checks that host:port is free with a listener that does not share it, and answers the port
 * (the one the kernel picked when `port` is 0: an ephemeral port cannot be shared once bound).
 */
export function claimPort(host: string, port: number): Promise<number> {
  return new Promise<number>((resolvePort, reject) => {
    const probe = createNetServer();
    probe.once('error', () => reject(listenFailure(host, port, false)));
    probe.listen({ host, port, exclusive: true }, () => {
      const bound = (probe.address() as AddressInfo).port;
      probe.close(() => resolvePort(bound));
    });
  });
}

/** Listens on host:port, in the port's SO_REUSEPORT group when `shared`. */
export function listenOn(app: ReturnType<UwsModule['App']>, host: string, port: number, opts: { reusePort: boolean; shared: boolean }): Promise<us_listen_socket> {
  return new Promise((resolvePromise, reject) => {
    const options = opts.shared ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT;
    (app.listen as unknown as ListenWithOptions).call(app, host, port, options, (socket) => {
      if (socket) resolvePromise(socket);
      else reject(listenFailure(host, port, opts.reusePort));
    });
  });
}

function listenFailure(host: string, at: number, reusePort: boolean): ListenError {
  const hint = reusePort
    ? 'it is in use by a process that does not share it (or not permitted)'
    : 'it is in use (another Herald or another program), or not permitted; ' +
      'choose another port (port, or HERALD_PORT); to run several Herald nodes of one cluster on one port, set "reusePort": true on each';
  return new ListenError(`cannot listen on ${host}:${at}: ${hint}`);
}
