/**
 * Shows that a secret is set without showing it: its last two characters at most. A PEM key
 * shows none (its last characters are its footer, the same for every key).
 */
export function maskSecret(secret: string): string {
  const trimmed = secret.trim();
  if (trimmed.startsWith('-----BEGIN ')) return `${'•'.repeat(8)} (PEM)`;
  return trimmed.length >= 12 ? `${'•'.repeat(8)}${trimmed.slice(-2)}` : '•'.repeat(8);
}
