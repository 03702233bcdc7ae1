/**
 * Beams user tokens (D10/D11): a JWT signed HS256 with the instance secret key, claims `sub`
 * (the user id), `exp` and `iss` = `https://<instanceId>.<pushDomain>` or the official server
 * SDKs' fixed `https://<instanceId>.pushnotifications.pusher.com` (what `generateToken(userId)` issues). The algorithm is pinned, so a token
 * signed `none` or with another algorithm is refused before its claims are looked at.
 *
 * Descriptions say what was wrong but never contain the words "device token": the iOS SDK
 * reads those words in a 401 as "bad device token" rather than "bad user token".
 */
import { errors, jwtVerify, type JWTPayload } from 'jose';
import { HeraldError } from '../../errors.js';
import { isEncodableKeyPart } from '../keys.js';

/** Longest push user id (`sub`), in UTF-16 code units as the official Beams SDKs count it (channel user ids: channels/names.ts MAX_USER_ID_LENGTH). */
export const MAX_PUSH_USER_ID_LENGTH = 164;

const encoder = new TextEncoder();

/** The domain the official Beams server SDKs put in a token's issuer, whatever their `endpoint`. */
export const BEAMS_SDK_PUSH_DOMAIN = 'pushnotifications.pusher.com';

/** The issuer a user token must carry for an instance. */
export function expectedIssuer(instanceId: string, pushDomain: string): string {
  return `https://${instanceId}.${pushDomain}`;
}

/**
 * The issuers accepted for an instance: `https://<instanceId>.<pushDomain>` and the one the
 * official server SDKs' `generateToken` always writes (`https://<instanceId>.pushnotifications.pusher.com`,
 * fixed in the SDKs even when their `endpoint` points elsewhere). Both still need the instance's
 * secret key to sign, and both name this instance.
 */
export function acceptedIssuers(instanceId: string, pushDomain: string): string[] {
  return [...new Set([expectedIssuer(instanceId, pushDomain), expectedIssuer(instanceId, BEAMS_SDK_PUSH_DOMAIN)])];
}

/** True when `userId` can be a user id: 1 to 164 characters and storable (no lone surrogate). */
export function isValidUserId(userId: unknown): userId is string {
  return typeof userId === 'string' && userId.length >= 1 && userId.length <= MAX_PUSH_USER_ID_LENGTH && isEncodableKeyPart(userId);
}

/**
 * Verifies a user token and returns its user id. Throws: 401 USER_TOKEN_MALFORMED (not a JWT,
 * wrong algorithm, bad signature, expired, claim of the wrong type), 400 USER_TOKEN_CLAIM_MISSING
 * (`exp`, `sub` or `iss` absent), 400 USER_TOKEN_SUB_INVALID, 403 USER_TOKEN_ISSUER_INVALID.
 */
export async function verifyUserToken(token: string, secretKey: string, issuers: string | readonly string[]): Promise<string> {
  const accepted = typeof issuers === 'string' ? [issuers] : issuers;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, encoder.encode(secretKey), { algorithms: ['HS256'] }));
  } catch (err) {
    if (err instanceof errors.JWTExpired) {
      throw new HeraldError(
        'USER_TOKEN_MALFORMED',
        "Authorization token malformed: expired (exp is in the past): have your auth endpoint issue a new one with the server SDK's generateToken(userId) (valid 24 h), then sign the user in again (setUserId)",
      );
    }
    throw new HeraldError('USER_TOKEN_MALFORMED', `Authorization token malformed: ${whatWasWrong(err)}`);
  }
  if (payload.exp === undefined) throw new HeraldError('USER_TOKEN_CLAIM_MISSING', 'User token has no exp (expiry) claim');
  if (payload.sub === undefined) throw new HeraldError('USER_TOKEN_CLAIM_MISSING', 'User token has no sub (user id) claim');
  if (payload.iss === undefined) throw new HeraldError('USER_TOKEN_CLAIM_MISSING', 'User token has no iss (issuer) claim');
  const sub: unknown = payload.sub;
  if (!isValidUserId(sub)) {
    throw new HeraldError(
      'USER_TOKEN_SUB_INVALID',
      typeof sub === 'string'
        ? `User id (sub) must have 1 to ${MAX_PUSH_USER_ID_LENGTH} characters, got ${sub.length}${isEncodableKeyPart(sub) ? '' : ' including a lone surrogate'}`
        : `User id (sub) must be a string, got ${typeof sub}`,
    );
  }
  if (!accepted.includes(payload.iss)) {
    throw new HeraldError('USER_TOKEN_ISSUER_INVALID', `Issuer of the user token is not valid: expected ${accepted.join(' or ')}`);
  }
  return sub;
}

function whatWasWrong(err: unknown): string {
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'the signature does not match the instance secret key';
  if (err instanceof errors.JOSEAlgNotAllowed) return 'the token must be signed with HS256';
  if (err instanceof errors.JWTClaimValidationFailed) return `claim ${err.claim}: ${err.message}`;
  if (err instanceof errors.JOSEError) return `not a valid JWT (${err.message})`;
  return 'not a valid JWT';
}
