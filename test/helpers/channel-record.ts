/**
 * What an application sees on a pusher-js channel, for the history and recovery tests: every
 * event (the plugin's herald:* ones included) with its data, in the order it was emitted.
 */

/** Everything the application code sees on a channel: events with their data, in order. */
export function record(channel: { bind_global(cb: (event: string, data: unknown) => void): unknown }): [string, unknown][] {
  const seen: [string, unknown][] = [];
  channel.bind_global((event, data) => {
    if (event !== 'pusher:subscription_succeeded') seen.push([event, data]);
  });
  return seen;
}

/** The data of the recorded events named `event`, in order. */
export const numbered = (seen: [string, unknown][], event = 'n'): unknown[] => seen.filter(([e]) => e === event).map(([, d]) => d);
