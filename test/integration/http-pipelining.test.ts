/**
 * HTTP/1.1 pipelining and half-closed connections behind an answer that waits on a shard
 * (src/http/uws-http.ts pauses the connection's reads until it is written). Raw sockets: no
 * HTTP client pipelines or half-closes on purpose. The waiting answer is made slow for sure by
 * stalling the shard (test hook), so the later writes arrive while it is pending.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { signedQuery } from '../helpers/signed-request.js';
import { nextEvent, sleep, until } from '../helpers/wait.js';

let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({ shards: 1, env: { HERALD_TEST_HOOKS: '1' } });
});

afterAll(async () => {
  await herald?.dispose();
});

/** A signed GET of a presence channel's user_count: answered only once the shard replies. */
function channelInfoRequest(channel: string): string {
  const path = `/apps/${DEFAULT_APP.id}/channels/${channel}`;
  const query = signedQuery(DEFAULT_APP, 'GET', path, { params: { info: 'user_count' } });
  return `GET ${path}?${query} HTTP/1.1\r\nHost: localhost\r\n\r\n`;
}

const get = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`;

/**
 * Stalls shard 0 for `ms` (on its own connection); resolves once the stall has (almost certainly)
 * begun, with the stall's answer to await at the end.
 */
async function stallShard(ms: number): Promise<{ released: Promise<Response> }> {
  const released = fetch(`${herald.baseUrl}/debug/shards/0/stall?stall_ms=${ms}`, { method: 'POST' });
  // Nothing outside the stalled shard tells when the stall began (the metrics ask the shard too).
  // time: 150 ms of the stall for its request to reach the shard.
  await sleep(150);
  return { released };
}

interface Answer {
  status: number;
  body: string;
}

/**
 * Reads HTTP/1.1 responses (Content-Length bodies) off `socket` until `count` arrived or it
 * closed. Reads from the call on: call it before writing the requests.
 */
async function readAnswers(socket: Socket, count: number, timeoutMs = 15_000): Promise<{ answers: Answer[]; closed: boolean }> {
  let buf = Buffer.alloc(0);
  const answers: Answer[] = [];
  let closed = false;
  const onData = (chunk: Buffer): void => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString();
      const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      if (answers.length < count) answers.push({ status: Number(head.split(' ')[1]), body: buf.subarray(end + 4, end + 4 + length).toString() });
      buf = buf.subarray(end + 4 + length);
    }
  };
  const onClose = (): void => {
    closed = true;
  };
  socket.on('data', onData);
  socket.once('close', onClose);
  socket.on('error', () => undefined);
  try {
    await until(() => answers.length === count || closed, () => `${count} answers (got ${answers.length})`, timeoutMs);
  } finally {
    socket.off('data', onData);
    socket.off('close', onClose);
  }
  return { answers, closed };
}

async function open(): Promise<Socket> {
  const socket = connect(herald.port, '127.0.0.1');
  await nextEvent(socket, 'connect', 'a TCP connection to Herald');
  return socket;
}

describe('HTTP pipelining behind an answer that waits on a shard', () => {
  it('answers requests pipelined behind it, in order', async () => {
    const stalled = await stallShard(1500);
    const socket = await open();
    try {
      const reading = readAnswers(socket, 4);
      socket.write(channelInfoRequest('presence-pipelined'));
      // time: 300 ms into the 1.5 s stall the first request is read and waiting on the shard.
      await sleep(300);
      // Written while the first answer is pending: one write, three requests, the last of
      // which waits on the shard too.
      socket.write(get('/ready') + get('/no-such-route') + get('/health'));
      const { answers } = await reading;
      expect(answers.map((a) => a.status)).toEqual([200, 200, 404, 200]);
      expect(JSON.parse(answers[0]!.body)).toEqual({ occupied: false, user_count: 0 });
      expect(JSON.parse(answers[1]!.body)).toEqual({ ready: true });
      expect(JSON.parse(answers[3]!.body)).toMatchObject({ status: 'ok' });
      // The connection is still usable afterwards.
      const again = readAnswers(socket, 1);
      socket.write(get('/ready'));
      expect((await again).answers.map((a) => a.status)).toEqual([200]);
    } finally {
      socket.destroy();
      await stalled.released;
    }
  });

  it('answers a request whose client half-closed (FIN) while the answer was pending', async () => {
    const stalled = await stallShard(1000);
    const socket = await open();
    try {
      const reading = readAnswers(socket, 1);
      socket.write(channelInfoRequest('presence-half-closed'));
      // time: 300 ms into the 1 s stall the request is read and waiting on the shard.
      await sleep(300);
      socket.end();
      const { answers } = await reading;
      expect(answers.map((a) => a.status)).toEqual([200]);
      expect(JSON.parse(answers[0]!.body)).toEqual({ occupied: false, user_count: 0 });
    } finally {
      socket.destroy();
      await stalled.released;
    }
  });

  it('answers requests pipelined in one write behind synchronous answers', async () => {
    const socket = await open();
    try {
      const reading = readAnswers(socket, 3);
      socket.write(get('/ready') + get('/no-such-route') + get('/ready'));
      const { answers } = await reading;
      expect(answers.map((a) => a.status)).toEqual([200, 404, 200]);
    } finally {
      socket.destroy();
    }
  });
});
