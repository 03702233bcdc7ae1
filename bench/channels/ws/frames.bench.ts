/**
 * Event serialisation (src/channels/frames.ts): building the frame subscribers receive,
 * once per channel per trigger, and the presence subscription_succeeded frame.
 */
import { channelEvent, subscriptionSucceeded, topicFor } from '../../../src/channels/frames.js';
import type { MicroSuite } from '../../micro-suite.js';

const data = JSON.stringify({ message: 'hello world', from: 'user-42', at: 1_700_000_000_000, tags: ['a', 'b'] });
const bigData = JSON.stringify({ blob: 'x'.repeat(8 * 1024) });
const members: [string, unknown][] = Array.from({ length: 100 }, (_, i) => [`user-${i}`, { name: `User ${i}` }]);

export const suite: MicroSuite = {
  source: 'src/channels/frames.ts',
  setup(bench) {
    let sink = 0;
    bench.add('channelEvent (100 B data)', () => {
      sink ^= channelEvent('new-message', 'private-chat-room-7', data).length;
    });
    bench.add('channelEvent (8 KiB data)', () => {
      sink ^= channelEvent('new-message', 'private-chat-room-7', bigData).length;
    });
    bench.add('topicFor (app id + channel)', () => {
      sink ^= topicFor('app-id', 'private-chat-room-7').length;
    });
    bench.add('subscriptionSucceeded (presence, 100 members)', () => {
      sink ^= subscriptionSucceeded('presence-lobby', members).length;
    });
    return { teardown: () => void sink };
  },
};
