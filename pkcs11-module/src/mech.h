/* Which mechanism signs with which key, and how: in message mode, or in digest mode over a digest
 * made here. */
#ifndef SVCP11_MECH_H
#define SVCP11_MECH_H

#include <stddef.h>

#include "keys.h"
#include "pkcs11.h"

typedef enum { MODE_NONE, MODE_MESSAGE, MODE_DIGEST } sign_mode;

typedef struct {
  sign_mode mode;
  const char *digest; /* the X-SVC-Digest name in digest mode */
  int hash_nid;       /* NID of the local hash for hash-and-sign mechanisms; 0: input is the digest */
  int raw_digest;     /* input is already the digest (CKM_ECDSA, CKM_RSA_PKCS_PSS, CKM_RSA_PKCS) */
  int digest_info;    /* the digest comes in a DER DigestInfo (CKM_RSA_PKCS) */
  int mu;             /* ML-DSA: μ computed here for multi-part */
  size_t digest_len;  /* expected input length for raw digests (0: any of 32/48/64) */
} sign_plan;

/* How `mech` signs with `k`, or a CKR_* why not. `multipart` is unknown at init; the plan covers
 * both (mu says μ may be used). */
CK_RV mech_plan(const remote_key *k, const CK_MECHANISM *mech, sign_plan *plan);
/* Mechanisms offered for the keys in `t` (the truth: at least one key signs with each). */
size_t mech_list(const token_listing *t, CK_MECHANISM_TYPE *out, size_t cap);
CK_RV mech_info(const token_listing *t, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);
/* The key type may use `type` at all (CKA_ALLOWED_MECHANISMS, C_SignInit's key check). */
int mech_allowed(const remote_key *k, CK_MECHANISM_TYPE type);
size_t mech_allowed_list(const remote_key *k, CK_MECHANISM_TYPE *out, size_t cap);

/* The digest-mode flag (DG_*), X-SVC-Digest name and libcrypto NID of SHA-256/384/512 by bits. */
unsigned mech_digest_flag(int bits);
const char *mech_digest_name(int bits);
int mech_digest_nid(int bits);
/* The fixed part of a DER DigestInfo of SHA-256/384/512 before the digest (RFC 8017 9.2). */
#define DIGEST_INFO_PREFIX_LEN 19
#endif
