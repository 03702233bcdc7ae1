import { describe, expect, it } from 'vitest';
import { gatewayPayload, pusherMetadata } from '../../../../../src/push/shard/publishes/payload.js';

const ids = ['inst', 'pubid-1'] as const;

describe('gatewayPayload', () => {
  it('adds data.pusher where each Beams SDK reads it, without touching the request object', () => {
    const apns = { aps: { alert: { title: 't' } }, data: { deep: 1 } };
    const out = gatewayPayload('apns', apns, ...ids);
    expect(out).toEqual({ aps: apns.aps, data: { deep: 1, pusher: { instanceId: 'inst', publishId: 'pubid-1', hasDisplayableContent: true, hasData: true } } });
    expect(apns.data).toEqual({ deep: 1 });
    expect(gatewayPayload('web', { notification: { title: 'x' } }, ...ids)).toEqual({
      notification: { title: 'x' },
      data: { pusher: { instanceId: 'inst', publishId: 'pubid-1', hasDisplayableContent: true, hasData: false } },
    });
  });

  it('computes hasDisplayableContent and hasData as the SDKs do', () => {
    expect(pusherMetadata('apns', { aps: { 'content-available': 1 } }, ...ids)).toMatchObject({ hasDisplayableContent: false, hasData: false });
    expect(pusherMetadata('fcm', { data: { a: '1' } }, ...ids)).toMatchObject({ hasDisplayableContent: false, hasData: true });
    expect(pusherMetadata('fcm', { notification: {}, data: { pusher: 'theirs' } }, ...ids)).toMatchObject({ hasDisplayableContent: false, hasData: false });
    expect(pusherMetadata('web', { notification: { body: 'b' } }, ...ids)).toMatchObject({ hasDisplayableContent: true });
  });
});
