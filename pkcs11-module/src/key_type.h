/* The key types /token names, and what follows from the type alone: lengths, curve, PKCS#11 key
 * type and parameter set, and whether libcrypto verifies it here. */
#ifndef SVCP11_KEY_TYPE_H
#define SVCP11_KEY_TYPE_H

#include <stddef.h>

#include "pkcs11.h"

typedef enum {
  KT_EC_P256,
  KT_EC_P384,
  KT_ED25519,
  KT_RSA_3072,
  KT_RSA_3072_PKCS1V15,
  KT_ML_DSA_44,
  KT_ML_DSA_65,
  KT_ML_DSA_87,
  KT_COMPOSITE,
  KT_UNKNOWN
} key_type;

/* "ec-p256", …, "composite-mldsa65-ed25519"; KT_UNKNOWN for any other name. */
key_type key_type_from_name(const char *name);
/* The raw public key's length as the daemon encodes it; 0 for RSA (a DER RSAPublicKey). */
size_t key_type_raw_length(key_type t);
/* CKA_EC_PARAMS (the curve's OID, DER), or NULL for the types without a curve. */
const unsigned char *key_ec_params(key_type t, size_t *len);
CK_KEY_TYPE key_type_ckk(key_type t);
/* An RSA key, whichever its signature scheme (PSS or PKCS #1 v1.5). */
int key_type_is_rsa(key_type t);
/* CKA_PARAMETER_SET of an ML-DSA type. */
CK_ULONG key_type_parameter_set(key_type t);
/* EC, RSA (PSS and PKCS #1 v1.5) and Ed25519 are verified here with libcrypto; ML-DSA and the composite by the daemon
 * (POST /verify). */
int key_type_verified_here(key_type t);

#endif
