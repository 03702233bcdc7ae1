/**
 * What the three fake gateways add to the shipped local gateway server (src/sandbox): the test
 * certificate, 127.0.0.1 on a free port, and scripted behaviour (dead tokens, "fail the next N
 * requests for token X with status S"). The protocols themselves are src/sandbox/*-protocol.ts.
 */
import type { TokenAnswer } from '../../src/sandbox/exchange.js';
import { GatewayServer, type GatewayRequest, type GatewayResponse } from '../../src/sandbox/gateway-server.js';
import { serverTlsOptions } from './tls.js';

/** One scripted failure answer. `reason` overrides the fake's default error body reason/code. */
export interface ScriptedFailure {
  status: number;
  /** Sent as a Retry-After header, in seconds. */
  retryAfterSeconds?: number;
  reason?: string;
}

/** A request as the fakes see it, body fully read. */
export type FakeRequest = GatewayRequest;

/** What a fake answers; an object body is sent as JSON. */
export type FakeResponse = GatewayResponse;

/** Base of ApnsFake, FcmFake and WebPushFake: subclasses implement handle(). */
export abstract class FakeGateway {
  /** Tokens the fake answers as permanently gone (each fake uses its gateway's own answer). */
  readonly deadTokens = new Set<string>();
  readonly #failures = new Map<string, { remaining: number; failure: ScriptedFailure }[]>();
  readonly #server: GatewayServer;
  #port = 0;

  protected constructor(allowHTTP1: boolean) {
    this.#server = new GatewayServer({ ...serverTlsOptions(), allowHTTP1, handler: (request) => this.handle(request) });
  }

  /** TLS connections accepted since start (shows pooling and reconnects). */
  get connectionsAccepted(): number {
    return this.#server.connectionsAccepted;
  }

  /** `https://127.0.0.1:<port>`; valid after start(). */
  get origin(): string {
    if (!this.#port) throw new Error('fake gateway not started');
    return `https://127.0.0.1:${this.#port}`;
  }

  async start(): Promise<this> {
    this.#port = await this.#server.listen(0, '127.0.0.1');
    return this;
  }

  /** Closes the listener and every connection; in-flight requests are cut. */
  stop(): Promise<void> {
    return this.#server.stop();
  }

  /** Sends GOAWAY on every HTTP/2 session and drops HTTP/1 sockets, as a gateway does when it rotates servers. */
  disconnectAll(): void {
    this.#server.disconnectAll();
  }

  /** The next `count` requests for `token` get `status` (Infinity for "always"). */
  failNext(token: string, count: number, status: number, options: Omit<ScriptedFailure, 'status'> = {}): void {
    const queue = this.#failures.get(token) ?? [];
    queue.push({ remaining: count, failure: { status, ...options } });
    this.#failures.set(token, queue);
  }

  /** Forgets dead tokens and scripted failures. */
  resetBehaviour(): void {
    this.deadTokens.clear();
    this.#failures.clear();
  }

  /** The scripted answer for `token`: a pending scripted failure (consumed), else dead. */
  protected scriptedAnswer(token: string): TokenAnswer | undefined {
    const failure = this.#takeFailure(token);
    if (failure) return { kind: 'status', ...failure };
    return this.deadTokens.has(token) ? { kind: 'unregistered' } : undefined;
  }

  #takeFailure(token: string): ScriptedFailure | undefined {
    const queue = this.#failures.get(token);
    const head = queue?.[0];
    if (!queue || !head) return undefined;
    head.remaining--;
    if (head.remaining <= 0) queue.shift();
    if (queue.length === 0) this.#failures.delete(token);
    return head.failure;
  }

  protected abstract handle(request: FakeRequest): Promise<FakeResponse>;
}
