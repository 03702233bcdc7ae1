/**
 * How the sandbox gateway chooses its answer for a token, so that an app developer can see
 * each outcome without Apple or Google: by the token's first characters (APNs device tokens
 * are hexadecimal, so theirs are digits: the HTTP status), and for web push by the name of
 * the subscription (the last part of its endpoint, chosen when it was made). Anything else is
 * accepted.
 */
import type { TokenAnswer } from './exchange.js';

/** Retry-After of a `throttled` answer, in seconds. */
export const THROTTLED_RETRY_AFTER_SECONDS = 1;

/** One outcome, the prefixes that ask for it, and the gateways' answer. */
export interface SandboxAnswerRule {
  name: 'unregistered' | 'bad' | 'throttled';
  /** Start of an APNs device token (hex digits). */
  apnsPrefix: string;
  /** Start of an FCM registration token or of a web push subscription's name. */
  prefix: string;
  answer: TokenAnswer;
}

export const SANDBOX_ANSWER_RULES: readonly SandboxAnswerRule[] = Object.freeze([
  { name: 'unregistered', apnsPrefix: '0410', prefix: 'unregistered-', answer: { kind: 'unregistered' } },
  { name: 'bad', apnsPrefix: '0400', prefix: 'bad-', answer: { kind: 'bad-token' } },
  { name: 'throttled', apnsPrefix: '0429', prefix: 'throttled-', answer: { kind: 'status', status: 429, retryAfterSeconds: THROTTLED_RETRY_AFTER_SECONDS } },
]);

/** The answer for an APNs device token, or undefined to accept it. */
export function apnsAnswer(token: string): TokenAnswer | undefined {
  const lower = token.toLowerCase();
  return SANDBOX_ANSWER_RULES.find((rule) => lower.startsWith(rule.apnsPrefix))?.answer;
}

/** The answer for an FCM token or a web push subscription name, or undefined to accept it. */
export function prefixAnswer(tokenOrName: string): TokenAnswer | undefined {
  return SANDBOX_ANSWER_RULES.find((rule) => tokenOrName.startsWith(rule.prefix))?.answer;
}
