/**
 * What C_Sign and C_Verify are given for one operation: the mechanism with a fresh parameter, and
 * the data — the message, its digest where the daemon hashes for the mechanism, or in digest mode
 * the digest the client sent.
 */
import { createHash } from "node:crypto";
import { type DigestName, digestSigning } from "./digest_mode.ts";
import type { KeyInternals } from "./key_cache.ts";
import type { SigningMechanism } from "./key_types.ts";
import type { MechanismChoice } from "./session_ops.ts";

/** The mechanism and a fresh parameter (its buffers live for one call) of a signing choice. */
export function choiceOf(signing: SigningMechanism): MechanismChoice {
  return { mechanism: signing.mechanism, parameter: signing.parameter?.() };
}

/**
 * The signing choice and the data for C_Sign/C_Verify: the key's mechanism over the message, or in
 * digest mode the digest's mechanism over the digest as sent.
 */
export function signingAndData(
  k: KeyInternals,
  message: Uint8Array,
  digest: DigestName | undefined,
): [SigningMechanism, Uint8Array] {
  if (digest === undefined) return [k.signing, prepareData(k.signing, message)];
  const signing = digestSigning(k.spec, digest);
  if (!signing) throw new RangeError(`${k.spec.name} keys take no ${digest} digest mode`);
  return [signing, message];
}

/** The message as the mechanism takes it: its digest where the daemon hashes (CKM_ECDSA). */
function prepareData(signing: SigningMechanism, message: Uint8Array): Uint8Array {
  return signing.prehash ? createHash(signing.prehash).update(message).digest() : message;
}
