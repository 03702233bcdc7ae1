/**
 * What the local gateways (src/sandbox/*-protocol.ts) share: the answer chosen for a token
 * instead of accepting it, and what one request came to. A protocol turns a request into an
 * Exchange and keeps no log of its own: the sandbox gateway and the tests' fakes each record
 * what they need.
 */
import type { GatewayResponse } from './gateway-server.js';

/**
 * An answer a gateway gives a token instead of accepting its notification, each in the
 * gateway's own words:
 * - `unregistered`: the token is dead (APNs 410 Unregistered, FCM 404 UNREGISTERED, web push 410);
 * - `bad-token`: the token is malformed (APNs 400 BadDeviceToken, FCM 400 INVALID_ARGUMENT, web push 400);
 * - `status`: any other status, with the gateway's default reason for it unless `reason` is
 *   given, and a Retry-After header (seconds) when `retryAfterSeconds` is.
 */
export type TokenAnswer =
  | { kind: 'unregistered' }
  | { kind: 'bad-token' }
  | { kind: 'status'; status: number; reason?: string; retryAfterSeconds?: number };

/** Chooses the answer for one token (undefined: accept it). */
export type TokenAnswers<T = string> = (token: T) => TokenAnswer | undefined;

/** One request's outcome: the response, and what a gateway records of it. */
export interface Exchange<R> {
  response: GatewayResponse;
  /** A request that passed authentication, with the status answered. */
  received?: R;
  /** A request refused before that (authentication, a missing header), with the reason. */
  rejected?: { status: number; reason: string };
}

/** The Retry-After header an answer asks for, if any. */
export function retryAfterHeader(answer: TokenAnswer): Record<string, string> {
  return answer.kind === 'status' && answer.retryAfterSeconds !== undefined ? { 'retry-after': String(answer.retryAfterSeconds) } : {};
}

/** A header's first value. */
export function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
