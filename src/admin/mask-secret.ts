/** Shows that a secret is set without showing it: its length and last two characters at most. */
export function maskSecret(secret: string): string {
  return secret.length >= 12 ? `${'•'.repeat(8)}${secret.slice(-2)}` : '•'.repeat(8);
}
