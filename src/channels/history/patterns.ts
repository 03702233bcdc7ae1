/**
 * Which channels of an app keep their events (`apps[].history.channels`): glob patterns where
 * `*` stands for any run of characters. Compiled once per history config object (a reload or
 * an admin API change makes a new one) into one anchored regular expression.
 */
import type { AppConfig } from '../../config/schema.js';

const compiled = new WeakMap<object, RegExp>();

/** `*` → `.*`, everything else literal. */
function patternSource(pattern: string): string {
  return pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
}

/** True when the app keeps the events of `channel` (its history is on and a pattern names it). */
export function keepsHistory(app: Pick<AppConfig, 'history'>, channel: string): boolean {
  const history = app.history;
  if (history === null) return false;
  let re = compiled.get(history);
  if (!re) {
    re = new RegExp(`^(?:${history.channels.map(patternSource).join('|')})$`, 's');
    compiled.set(history, re);
  }
  return re.test(channel);
}
