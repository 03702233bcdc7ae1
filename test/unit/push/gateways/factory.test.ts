import { describe, expect, it } from 'vitest';
import { closeGatewayClients, createGatewayClients } from '../../../../src/push/gateways/factory.js';
import { apnsKeys, fcmKeys, TEST_CA_FILE, vapidKeys } from '../../../fakes/tls.js';

describe('createGatewayClients', () => {
  it('builds a client for each configured platform only', async () => {
    const vapid = vapidKeys();
    const clients = createGatewayClients({
      apns: { endpoint: 'https://127.0.0.1:1', teamId: 'T', keyId: 'K', privateKey: apnsKeys().privateKey, caFile: TEST_CA_FILE },
      fcm: null,
      web: { vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: 'mailto:a@herald.test', caFile: null, allowPrivateEndpoints: false },
    });
    expect(Object.keys(clients).sort()).toEqual(['apns', 'web']);
    expect(clients.apns?.platform).toBe('apns');
    expect(clients.web?.platform).toBe('web');
    await closeGatewayClients(clients);

    const fcmOnly = createGatewayClients({
      fcm: {
        endpoint: 'https://127.0.0.1:1', tokenUri: 'https://127.0.0.1:1/token', projectId: 'p',
        clientEmail: 'e@p.iam.gserviceaccount.com', privateKey: fcmKeys().privateKey, caFile: null,
      },
    }, { retry: { attempts: 1 } });
    expect(Object.keys(fcmOnly)).toEqual(['fcm']);
    await closeGatewayClients(fcmOnly);
  });
});
