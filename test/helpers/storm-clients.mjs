/**
 * A child process holding many raw protocol-7 WebSocket clients (ws), for storm tests: one
 * process can hold only so many sockets (open-file limit), so a test forks several. Plain
 * JavaScript, run by node directly. Driven over IPC:
 *
 *   {cmd: 'connect', port, key, secret, clients: [{channels: [name...], userId?}], wave}
 *       opens the clients `wave` at a time, each subscribing to its channels (presence channels
 *       signed with the secret for its userId) and waiting for every answer before the next
 *       wave; answers {type: 'connected', succeeded, errors, ms}.
 *   {cmd: 'open', port, key, secret, clients: [{channels}]}
 *       opens every client at once without subscribing yet; answers {type: 'opened', ms}.
 *   {cmd: 'subscribe'}
 *       every client opened by 'open' sends all its subscriptions at once (a reconnect storm);
 *       answers {type: 'subscribed', succeeded, errors, ms} once every subscription answered.
 *   {cmd: 'drop'}
 *       terminates every socket at once (no close handshake: a network blip); answers
 *       {type: 'dropped', sockets}.
 */
import { createHmac } from 'node:crypto';
import WebSocket from 'ws';

/** Sockets held by this process. */
const sockets = [];
/** Clients opened by 'open': each sends its subscriptions when called, resolving with the outcome. */
let deferred = [];

function sign(secret, key, socketId, channel, channelData) {
  const input = channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
  return `${key}:${createHmac('sha256', secret).update(input).digest('hex')}`;
}

/**
 * Opens one client and subscribes it; resolves with {succeeded, errors} once every channel
 * answered (or the socket closed). With `onOpen`, subscribes only when the function it is
 * handed is called (it is handed on connection_established).
 */
function openClient(port, key, secret, client, onOpen) {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${key}?protocol=7&client=js&version=8.4.0`);
    sockets.push(ws);
    const pending = new Set(client.channels);
    let succeeded = 0;
    let errors = 0;
    const done = () => {
      if (pending.size === 0) resolve({ succeeded, errors });
    };
    ws.on('error', () => undefined);
    ws.on('close', () => {
      errors += pending.size;
      pending.clear();
      resolve({ succeeded, errors });
    });
    ws.on('message', (raw) => {
      const frame = JSON.parse(raw.toString());
      if (frame.event === 'pusher:connection_established') {
        const socketId = JSON.parse(frame.data).socket_id;
        if (onOpen) onOpen(() => subscribeAll(socketId));
        else subscribeAll(socketId);
      } else if (frame.event === 'pusher_internal:subscription_succeeded' && pending.delete(frame.channel)) {
        succeeded++;
        done();
      } else if (frame.event === 'pusher:subscription_error' && pending.delete(frame.channel)) {
        errors++;
        done();
      }
    });
    const subscribeAll = (socketId) => {
      for (const channel of client.channels) {
        const data = { channel };
        if (channel.startsWith('presence-')) {
          data.channel_data = JSON.stringify({ user_id: client.userId, user_info: { name: client.userId } });
          data.auth = sign(secret, key, socketId, channel, data.channel_data);
        } else if (channel.startsWith('private-')) {
          data.auth = sign(secret, key, socketId, channel);
        }
        ws.send(JSON.stringify({ event: 'pusher:subscribe', data }));
      }
      if (client.channels.length === 0) done();
    };
  });
}

async function run(message) {
  const started = Date.now();
  if (message.cmd === 'connect') {
    let succeeded = 0;
    let errors = 0;
    for (let i = 0; i < message.clients.length; i += message.wave) {
      const wave = message.clients.slice(i, i + message.wave);
      for (const r of await Promise.all(wave.map((c) => openClient(message.port, message.key, message.secret, c)))) {
        succeeded += r.succeeded;
        errors += r.errors;
      }
    }
    return { type: 'connected', succeeded, errors, ms: Date.now() - started };
  }
  if (message.cmd === 'open') {
    const opened = message.clients.map(
      (c) =>
        new Promise((resolveOpen) => {
          const outcome = openClient(message.port, message.key, message.secret, c, (subscribe) => resolveOpen({ subscribe, outcome }));
          // Closed before it was established: nothing to subscribe (its channels count as errors).
          void outcome.then(() => resolveOpen({ subscribe: () => undefined, outcome }));
        }),
    );
    deferred = await Promise.all(opened);
    return { type: 'opened', ms: Date.now() - started };
  }
  if (message.cmd === 'subscribe') {
    const pending = deferred.splice(0);
    for (const d of pending) d.subscribe();
    const results = await Promise.all(pending.map((d) => d.outcome));
    return {
      type: 'subscribed',
      succeeded: results.reduce((n, r) => n + r.succeeded, 0),
      errors: results.reduce((n, r) => n + r.errors, 0),
      ms: Date.now() - started,
    };
  }
  if (message.cmd === 'drop') {
    const count = sockets.length;
    for (const ws of sockets.splice(0)) ws.terminate();
    return { type: 'dropped', sockets: count };
  }
  throw new Error(`unknown command ${message.cmd}`);
}

process.on('message', (message) => {
  run(message).then(
    (reply) => process.send(reply),
    (err) => process.send({ type: 'error', error: String(err?.stack ?? err) }),
  );
});
process.on('disconnect', () => process.exit(0));
