import { describe, expect, it } from 'vitest';
import PusherServer from 'pusher';
import { channelSignatureInput, userSignatureInput, verifyAuth } from '../../../src/channels/auth.js';

const app = { appId: '1', key: 'the-key', secret: 'the-secret', host: '127.0.0.1' };
const sdk = new PusherServer(app);

describe('socket auth signatures (checked against the official server SDK)', () => {
  it('accepts private and presence signatures the SDK makes', () => {
    const priv = sdk.authorizeChannel('123.456', 'private-a');
    expect(verifyAuth(app.key, app.secret, priv.auth, channelSignatureInput('123.456', 'private-a'))).toBe(true);
    const pres = sdk.authorizeChannel('123.456', 'presence-a', { user_id: 'u', user_info: { n: 1 } });
    expect(verifyAuth(app.key, app.secret, pres.auth, channelSignatureInput('123.456', 'presence-a', pres.channel_data))).toBe(true);
  });

  it('accepts the SDK user sign-in signature', () => {
    const user = sdk.authenticateUser('1.2', { id: 'u1', watchlist: ['u2'] });
    expect(verifyAuth(app.key, app.secret, user.auth, userSignatureInput('1.2', user.user_data))).toBe(true);
  });

  it('refuses another socket, channel, key or secret, and malformed values', () => {
    const { auth } = sdk.authorizeChannel('123.456', 'private-a');
    expect(verifyAuth(app.key, app.secret, auth, channelSignatureInput('123.457', 'private-a'))).toBe(false);
    expect(verifyAuth(app.key, app.secret, auth, channelSignatureInput('123.456', 'private-b'))).toBe(false);
    expect(verifyAuth('other-key', app.secret, auth, channelSignatureInput('123.456', 'private-a'))).toBe(false);
    expect(verifyAuth(app.key, 'other', auth, channelSignatureInput('123.456', 'private-a'))).toBe(false);
    const sig = auth.split(':')[1]!;
    for (const bad of [undefined, 42, '', sig, `:${sig}`, `${app.key}:`, `${app.key}:${sig}00`, `${app.key}:${sig.slice(2)}`, `${app.key}:${sig.toUpperCase()}`]) {
      expect(verifyAuth(app.key, app.secret, bad, channelSignatureInput('123.456', 'private-a'))).toBe(false);
    }
  });
});
