/* Which mechanism signs with which key, and how: the daemon signs in message mode with one
 * mechanism per key type (ec-p256 ECDSA-SHA256, ec-p384 ECDSA-SHA384, ed25519 EdDSA, rsa-3072
 * SHA256-RSA-PKCS-PSS with a 32-byte salt, rsa-3072-pkcs1v15 SHA256-RSA-PKCS, ML-DSA hedged with an
 * empty context, the composite), and in digest mode over a digest made here where /token lists the
 * digest for the key. A mechanism is offered only where one of the two carries it out exactly: an
 * RSA key signs with its own scheme only, PSS or PKCS #1 v1.5, never the other. */
#include <openssl/obj_mac.h>
#include <string.h>

#include "mech.h"

static int is_ec(key_type t) { return t == KT_EC_P256 || t == KT_EC_P384; }
static int is_rsa_pss(key_type t) { return t == KT_RSA_3072; }
static int is_rsa_pkcs1(key_type t) { return t == KT_RSA_3072_PKCS1V15; }
static int is_mldsa(key_type t) {
  return t == KT_ML_DSA_44 || t == KT_ML_DSA_65 || t == KT_ML_DSA_87;
}

/* The SHA-2 a hash-and-sign mechanism names; 0 for others. */
static int mech_hash_bits(CK_MECHANISM_TYPE m) {
  switch (m) {
    case CKM_ECDSA_SHA256:
    case CKM_SHA256_RSA_PKCS_PSS:
    case CKM_SHA256_RSA_PKCS:
      return 256;
    case CKM_ECDSA_SHA384:
    case CKM_SHA384_RSA_PKCS_PSS:
    case CKM_SHA384_RSA_PKCS:
      return 384;
    case CKM_ECDSA_SHA512:
    case CKM_SHA512_RSA_PKCS_PSS:
    case CKM_SHA512_RSA_PKCS:
      return 512;
    default:
      return 0;
  }
}

unsigned mech_digest_flag(int bits) {
  return bits == 256 ? DG_SHA256 : bits == 384 ? DG_SHA384 : bits == 512 ? DG_SHA512 : 0;
}

const char *mech_digest_name(int bits) {
  return bits == 256 ? "sha-256" : bits == 384 ? "sha-384" : "sha-512";
}

int mech_digest_nid(int bits) {
  return bits == 256 ? NID_sha256 : bits == 384 ? NID_sha384 : NID_sha512;
}

/* The hash of the daemon's message-mode mechanism for the key type (0: not hash-and-sign). */
static int native_hash_bits(key_type t) {
  return t == KT_EC_P256 || key_type_is_rsa(t) ? 256 : t == KT_EC_P384 ? 384 : 0;
}

/* Whether a hash-and-sign mechanism is one of the key type's family (ECDSA, PSS, PKCS #1 v1.5). */
static int hash_and_sign_family(key_type t, CK_MECHANISM_TYPE m) {
  switch (m) {
    case CKM_ECDSA_SHA256:
    case CKM_ECDSA_SHA384:
    case CKM_ECDSA_SHA512:
      return is_ec(t);
    case CKM_SHA256_RSA_PKCS_PSS:
    case CKM_SHA384_RSA_PKCS_PSS:
    case CKM_SHA512_RSA_PKCS_PSS:
      return is_rsa_pss(t);
    default:
      return is_rsa_pkcs1(t);
  }
}

static const CK_MECHANISM_TYPE EC_MECHS[] = {CKM_ECDSA, CKM_ECDSA_SHA256, CKM_ECDSA_SHA384,
                                             CKM_ECDSA_SHA512};

int mech_allowed(const remote_key *k, CK_MECHANISM_TYPE type) {
  const unsigned sha = DG_SHA256 | DG_SHA384 | DG_SHA512;
  switch (type) {
    case CKM_ECDSA:
      return is_ec(k->type) && (k->digests & sha) != 0;
    case CKM_RSA_PKCS_PSS:
      return is_rsa_pss(k->type) && (k->digests & sha) != 0;
    case CKM_RSA_PKCS:
      return is_rsa_pkcs1(k->type) && (k->digests & sha) != 0;
    case CKM_ECDSA_SHA256:
    case CKM_ECDSA_SHA384:
    case CKM_ECDSA_SHA512:
    case CKM_SHA256_RSA_PKCS_PSS:
    case CKM_SHA384_RSA_PKCS_PSS:
    case CKM_SHA512_RSA_PKCS_PSS:
    case CKM_SHA256_RSA_PKCS:
    case CKM_SHA384_RSA_PKCS:
    case CKM_SHA512_RSA_PKCS: {
      if (!hash_and_sign_family(k->type, type)) return 0;
      int bits = mech_hash_bits(type);
      return bits == native_hash_bits(k->type) || (k->digests & mech_digest_flag(bits)) != 0;
    }
    case CKM_EDDSA:
      return k->type == KT_ED25519;
    case CKM_ML_DSA:
      return is_mldsa(k->type);
    case CKM_COMPOSITE_MLDSA65_ED25519:
      return k->type == KT_COMPOSITE;
    default:
      return 0;
  }
}

/* Every mechanism this module can offer, in the order it lists them. */
static const CK_MECHANISM_TYPE OFFERABLE[] = {
    CKM_ECDSA,        CKM_ECDSA_SHA256,        CKM_ECDSA_SHA384,        CKM_ECDSA_SHA512,
    CKM_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS, CKM_SHA384_RSA_PKCS_PSS, CKM_SHA512_RSA_PKCS_PSS,
    CKM_RSA_PKCS,     CKM_SHA256_RSA_PKCS,     CKM_SHA384_RSA_PKCS,     CKM_SHA512_RSA_PKCS,
    CKM_EDDSA,        CKM_ML_DSA,              CKM_COMPOSITE_MLDSA65_ED25519};

size_t mech_allowed_list(const remote_key *k, CK_MECHANISM_TYPE *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof OFFERABLE / sizeof OFFERABLE[0]; i++)
    if (mech_allowed(k, OFFERABLE[i])) {
      if (out != NULL && n < cap) out[n] = OFFERABLE[i];
      n++;
    }
  return n;
}

static int param_empty(const CK_MECHANISM *m) { return m->pParameter == NULL || m->ulParameterLen == 0; }

/* CK_SIGN_ADDITIONAL_CONTEXT: an empty context and a hedge the service honours (it signs hedged). */
static CK_RV check_sign_context(const CK_MECHANISM *m) {
  if (param_empty(m)) return CKR_OK;
  if (m->ulParameterLen != sizeof(CK_SIGN_ADDITIONAL_CONTEXT)) return CKR_MECHANISM_PARAM_INVALID;
  const CK_SIGN_ADDITIONAL_CONTEXT *c = m->pParameter;
  if (c->ulContextLen != 0) return CKR_MECHANISM_PARAM_INVALID;
  if (c->hedgeVariant != CKH_HEDGE_PREFERRED && c->hedgeVariant != CKH_HEDGE_REQUIRED)
    return CKR_MECHANISM_PARAM_INVALID;
  return CKR_OK;
}

/* CK_EDDSA_PARAMS: only pure Ed25519 (no prehash, no context) is what the service signs. */
static CK_RV check_eddsa_params(const CK_MECHANISM *m) {
  if (param_empty(m)) return CKR_OK;
  if (m->ulParameterLen != sizeof(CK_EDDSA_PARAMS)) return CKR_MECHANISM_PARAM_INVALID;
  const CK_EDDSA_PARAMS *p = m->pParameter;
  return !p->phFlag && p->ulContextDataLen == 0 ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
}

/* CK_RSA_PKCS_PSS_PARAMS must be the digest mode's: MGF1 of the same hash, salt = hash length.
 * `bits` is the mechanism's hash (0 for CKM_RSA_PKCS_PSS: the parameter's hash). */
static CK_RV check_pss_params(const CK_MECHANISM *m, int *bits) {
  if (m->pParameter == NULL || m->ulParameterLen != sizeof(CK_RSA_PKCS_PSS_PARAMS))
    return CKR_MECHANISM_PARAM_INVALID;
  const CK_RSA_PKCS_PSS_PARAMS *p = m->pParameter;
  int hb = p->hashAlg == CKM_SHA256 ? 256 : p->hashAlg == CKM_SHA384 ? 384
                                          : p->hashAlg == CKM_SHA512 ? 512 : 0;
  CK_ULONG mgf = hb == 256 ? CKG_MGF1_SHA256 : hb == 384 ? CKG_MGF1_SHA384 : CKG_MGF1_SHA512;
  if (hb == 0 || (*bits != 0 && hb != *bits) || p->mgf != mgf || p->sLen != (CK_ULONG)hb / 8)
    return CKR_MECHANISM_PARAM_INVALID;
  *bits = hb;
  return CKR_OK;
}

static void plan_hash_and_sign(const remote_key *k, int bits, sign_plan *plan) {
  plan->hash_nid = mech_digest_nid(bits);
  if (k->digests & mech_digest_flag(bits)) {
    plan->mode = MODE_DIGEST; /* hashed here: the message never crosses the wire */
    plan->digest = mech_digest_name(bits);
  } else {
    plan->mode = MODE_MESSAGE;
  }
}

CK_RV mech_plan(const remote_key *k, const CK_MECHANISM *mech, sign_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (!mech_allowed(k, mech->mechanism)) {
    /* A mechanism this module offers for other keys is the wrong one for this key. */
    return CKR_KEY_TYPE_INCONSISTENT;
  }
  CK_RV rv;
  int bits = mech_hash_bits(mech->mechanism);
  switch (mech->mechanism) {
    case CKM_ECDSA:
      if (!param_empty(mech)) return CKR_MECHANISM_PARAM_INVALID;
      plan->mode = MODE_DIGEST;
      plan->raw_digest = 1; /* the name follows from the input length */
      return CKR_OK;
    case CKM_ECDSA_SHA256:
    case CKM_ECDSA_SHA384:
    case CKM_ECDSA_SHA512:
      if (!param_empty(mech)) return CKR_MECHANISM_PARAM_INVALID;
      plan_hash_and_sign(k, bits, plan);
      return CKR_OK;
    case CKM_RSA_PKCS_PSS:
      if ((rv = check_pss_params(mech, &bits)) != CKR_OK) return rv;
      if (!(k->digests & mech_digest_flag(bits))) return CKR_MECHANISM_PARAM_INVALID;
      plan->mode = MODE_DIGEST;
      plan->raw_digest = 1;
      plan->hash_nid = mech_digest_nid(bits);
      plan->digest = mech_digest_name(bits);
      plan->digest_len = (size_t)bits / 8;
      return CKR_OK;
    case CKM_SHA256_RSA_PKCS_PSS:
    case CKM_SHA384_RSA_PKCS_PSS:
    case CKM_SHA512_RSA_PKCS_PSS:
      if ((rv = check_pss_params(mech, &bits)) != CKR_OK) return rv;
      plan_hash_and_sign(k, bits, plan);
      return CKR_OK;
    case CKM_RSA_PKCS:
      /* Signs a DER DigestInfo (RFC 8017 section 9.2), as libp11 gives OpenSSL's PKCS #1 v1.5:
       * the digest inside goes to digest mode; anything else is refused when it is given. */
      if (!param_empty(mech)) return CKR_MECHANISM_PARAM_INVALID;
      plan->mode = MODE_DIGEST;
      plan->raw_digest = 1;
      plan->digest_info = 1;
      return CKR_OK;
    case CKM_SHA256_RSA_PKCS:
    case CKM_SHA384_RSA_PKCS:
    case CKM_SHA512_RSA_PKCS:
      if (!param_empty(mech)) return CKR_MECHANISM_PARAM_INVALID;
      plan_hash_and_sign(k, bits, plan);
      return CKR_OK;
    case CKM_EDDSA:
      if ((rv = check_eddsa_params(mech)) != CKR_OK) return rv;
      plan->mode = MODE_MESSAGE;
      return CKR_OK;
    case CKM_ML_DSA:
      if ((rv = check_sign_context(mech)) != CKR_OK) return rv;
      plan->mode = MODE_MESSAGE;
      plan->mu = (k->digests & DG_MLDSA_MU) != 0;
      return CKR_OK;
    case CKM_COMPOSITE_MLDSA65_ED25519:
      if ((rv = check_sign_context(mech)) != CKR_OK) return rv;
      plan->mode = MODE_MESSAGE;
      return CKR_OK;
    default:
      return CKR_MECHANISM_INVALID;
  }
}

static int offered(const token_listing *t, CK_MECHANISM_TYPE m) {
  for (size_t i = 0; i < t->count; i++)
    if (!t->keys[i]->gone && mech_allowed(t->keys[i], m)) return 1;
  return 0;
}

size_t mech_list(const token_listing *t, CK_MECHANISM_TYPE *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof OFFERABLE / sizeof OFFERABLE[0]; i++) {
    if (!offered(t, OFFERABLE[i])) continue;
    if (out != NULL && n < cap) out[n] = OFFERABLE[i];
    n++;
  }
  return n;
}

/* Key size in CK_MECHANISM_INFO's unit: bits of the curve or modulus; the parameter set for ML-DSA. */
static CK_ULONG key_size(const remote_key *k) {
  switch (k->type) {
    case KT_EC_P256:
    case KT_ED25519:
      return 256;
    case KT_EC_P384:
      return 384;
    case KT_RSA_3072:
    case KT_RSA_3072_PKCS1V15:
      return (CK_ULONG)key_signature_length(k) * 8;
    case KT_ML_DSA_44:
      return CKP_ML_DSA_44;
    case KT_ML_DSA_65:
      return CKP_ML_DSA_65;
    case KT_ML_DSA_87:
      return CKP_ML_DSA_87;
    default:
      return 0;
  }
}

CK_RV mech_info(const token_listing *t, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info) {
  memset(info, 0, sizeof *info);
  int any = 0;
  for (size_t i = 0; i < t->count; i++) {
    const remote_key *k = t->keys[i];
    if (k->gone || !mech_allowed(k, type)) continue;
    CK_ULONG size = key_size(k);
    if (!any || size < info->ulMinKeySize) info->ulMinKeySize = size;
    if (!any || size > info->ulMaxKeySize) info->ulMaxKeySize = size;
    any = 1;
  }
  if (!any) return CKR_MECHANISM_INVALID;
  info->flags = CKF_SIGN | CKF_VERIFY;
  for (size_t i = 0; i < sizeof EC_MECHS / sizeof EC_MECHS[0]; i++)
    if (type == EC_MECHS[i]) info->flags |= CKF_EC_F_P | CKF_EC_OID | CKF_EC_UNCOMPRESS;
  return CKR_OK;
}
