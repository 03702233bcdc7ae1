import { describe, expect, it } from 'vitest';
import { maskSecret } from '../../../src/admin/mask-secret.js';

describe('maskSecret', () => {
  it('shows the last two characters of a long secret, none of a short one', () => {
    expect(maskSecret('0123456789abcdef')).toBe('••••••••ef');
    expect(maskSecret('short')).toBe('••••••••');
  });

  it('shows no character of a PEM key (its tail is the footer, and a newline)', () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n';
    expect(maskSecret(pem)).toBe('•••••••• (PEM)');
  });
});
