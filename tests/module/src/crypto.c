#include "crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <string.h>

#include "mldsa.h"

int random_bytes(uint8_t *out, size_t n) {
  return n == 0 || RAND_priv_bytes(out, (int)n) == 1 ? 0 : -1;
}

/* ---- Ed25519 ------------------------------------------------------------------------------ */

int ed25519_public(const uint8_t priv[ED25519_KEY_BYTES], uint8_t pub[ED25519_KEY_BYTES]) {
  EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, ED25519_KEY_BYTES);
  size_t len = ED25519_KEY_BYTES;
  int ok = k != NULL && EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == 32;
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

int ed25519_sign(const uint8_t priv[ED25519_KEY_BYTES], const uint8_t *msg, size_t len,
                 uint8_t sig[ED25519_SIG_BYTES]) {
  EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, ED25519_KEY_BYTES);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  size_t siglen = ED25519_SIG_BYTES;
  int ok = k != NULL && md != NULL && EVP_DigestSignInit(md, NULL, NULL, NULL, k) == 1 &&
           EVP_DigestSign(md, sig, &siglen, msg, len) == 1 && siglen == ED25519_SIG_BYTES;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

int ed25519_verify(const uint8_t pub[ED25519_KEY_BYTES], const uint8_t *msg, size_t len,
                   const uint8_t *sig, size_t siglen) {
  if (siglen != ED25519_SIG_BYTES) return 0;
  EVP_PKEY *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, ED25519_KEY_BYTES);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  int rc = -1;
  if (k != NULL && md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, k) == 1)
    rc = EVP_DigestVerify(md, sig, siglen, msg, len) == 1 ? 1 : 0;
  EVP_MD_CTX_free(md);
  EVP_PKEY_free(k);
  return rc;
}

/* ---- ECDSA P-256 ----------------------------------------------------------------------------- */

static EVP_PKEY *p256_from(const uint8_t *priv, const uint8_t *pub, size_t publen) {
  OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
  BIGNUM *d = priv ? BN_bin2bn(priv, P256_PRIV_BYTES, NULL) : NULL;
  OSSL_PARAM *params = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
  EVP_PKEY *k = NULL;
  int ok = bld != NULL && ctx != NULL && (priv == NULL || d != NULL) &&
           OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
           OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, publen) &&
           (d == NULL || OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d)) &&
           (params = OSSL_PARAM_BLD_to_param(bld)) != NULL && EVP_PKEY_fromdata_init(ctx) == 1;
  if (ok && EVP_PKEY_fromdata(ctx, &k, d ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) != 1)
    k = NULL;
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  BN_clear_free(d);
  EVP_PKEY_CTX_free(ctx);
  return k;
}

int p256_keygen(uint8_t priv[P256_PRIV_BYTES], uint8_t pub[P256_POINT_BYTES]) {
  EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  BIGNUM *d = NULL;
  size_t len = 0;
  int ok = k != NULL && EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &d) == 1 &&
           BN_bn2binpad(d, priv, P256_PRIV_BYTES) == P256_PRIV_BYTES &&
           EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, pub,
                                           P256_POINT_BYTES, &len) == 1 &&
           len == P256_POINT_BYTES && pub[0] == 0x04;
  BN_clear_free(d);
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

int p256_point_valid(const uint8_t *pub, size_t len) {
  if (len != P256_POINT_BYTES || pub[0] != 0x04) return 0;
  EVP_PKEY *k = p256_from(NULL, pub, len);
  EVP_PKEY_free(k);
  return k != NULL;
}

int p256_sign_digest(const uint8_t priv[P256_PRIV_BYTES], const uint8_t pub[P256_POINT_BYTES],
                     const uint8_t *digest, size_t len, uint8_t sig[P256_SIG_BYTES]) {
  EVP_PKEY *k = p256_from(priv, pub, P256_POINT_BYTES);
  EVP_PKEY_CTX *ctx = k ? EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL) : NULL;
  uint8_t der[80];
  size_t derlen = sizeof der;
  const uint8_t *q = der;
  ECDSA_SIG *es = NULL;
  int ok = ctx != NULL && EVP_PKEY_sign_init(ctx) == 1 &&
           EVP_PKEY_sign(ctx, der, &derlen, digest, len) == 1 &&
           (es = d2i_ECDSA_SIG(NULL, &q, (long)derlen)) != NULL &&
           BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32) == 32 &&
           BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32) == 32;
  ECDSA_SIG_free(es);
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(k);
  return ok ? 0 : -1;
}

int p256_verify_digest(const uint8_t pub[P256_POINT_BYTES], const uint8_t *digest, size_t len,
                       const uint8_t *sig, size_t siglen) {
  if (siglen != P256_SIG_BYTES) return 0;
  EVP_PKEY *k = p256_from(NULL, pub, P256_POINT_BYTES);
  EVP_PKEY_CTX *ctx = k ? EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL) : NULL;
  ECDSA_SIG *es = ECDSA_SIG_new();
  BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
  uint8_t *der = NULL;
  int derlen = -1, rc = -1;
  if (es != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(es, r, s) == 1) {
    r = s = NULL; /* owned by es now */
    derlen = i2d_ECDSA_SIG(es, &der);
  }
  if (ctx != NULL && derlen > 0 && EVP_PKEY_verify_init(ctx) == 1)
    rc = EVP_PKEY_verify(ctx, der, (size_t)derlen, digest, len) == 1 ? 1 : 0;
  OPENSSL_free(der);
  BN_free(r);
  BN_free(s);
  ECDSA_SIG_free(es);
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(k);
  return rc;
}

/* ---- hashes, HMAC, PBKDF2, AES-GCM ---------------------------------------------------------- */

int sha2(int bits, const uint8_t *msg, size_t len, uint8_t *out) {
  const EVP_MD *md = bits == 256 ? EVP_sha256() : bits == 384 ? EVP_sha384() : EVP_sha512();
  return EVP_Digest(msg, len, out, NULL, md, NULL) == 1 ? 0 : -1;
}

int hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t len,
                uint8_t out[32]) {
  unsigned outlen = 0;
  static const uint8_t empty[1];
  return HMAC(EVP_sha256(), keylen ? key : empty, (int)keylen, msg ? msg : empty, len, out,
              &outlen) != NULL && outlen == 32
             ? 0
             : -1;
}

int pbkdf2_sha256(const uint8_t *pin, size_t pinlen, const uint8_t *salt, size_t saltlen,
                  unsigned iterations, uint8_t out[32]) {
  return PKCS5_PBKDF2_HMAC((const char *)pin, (int)pinlen, salt, (int)saltlen, (int)iterations,
                           EVP_sha256(), 32, out) == 1
             ? 0
             : -1;
}

int seal(const uint8_t key[32], const uint8_t *aad, size_t aadlen, const uint8_t *plain,
         size_t len, uint8_t *sealed) {
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int n = 0, fin = 0;
  int ok = c != NULL && random_bytes(sealed, 12) == 0 &&
           EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, sealed) == 1 &&
           EVP_EncryptUpdate(c, NULL, &n, aad, (int)aadlen) == 1 &&
           EVP_EncryptUpdate(c, sealed + 12, &n, plain, (int)len) == 1 &&
           EVP_EncryptFinal_ex(c, sealed + 12 + n, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, sealed + 12 + len) == 1;
  EVP_CIPHER_CTX_free(c);
  return ok ? 0 : -1;
}

int unseal(const uint8_t key[32], const uint8_t *aad, size_t aadlen, const uint8_t *sealed,
           size_t sealedlen, uint8_t *plain) {
  if (sealedlen < SEAL_OVERHEAD) return -1;
  size_t len = sealedlen - SEAL_OVERHEAD;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int n = 0, fin = 0;
  int ok = c != NULL && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, sealed) == 1 &&
           EVP_DecryptUpdate(c, NULL, &n, aad, (int)aadlen) == 1 &&
           EVP_DecryptUpdate(c, plain, &n, sealed + 12, (int)len) == 1 &&
           EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(sealed + 12 + len)) == 1 &&
           EVP_DecryptFinal_ex(c, plain + n, &fin) == 1;
  EVP_CIPHER_CTX_free(c);
  if (!ok) OPENSSL_cleanse(plain, len);
  return ok ? 0 : -1;
}

/* ---- composite ML-DSA-65 + Ed25519 ----------------------------------------------------------- */

static const char COMPOSITE_PREFIX[] = "CompositeAlgorithmSignatures2025";
/* The draft's Label for id-MLDSA65-Ed25519-SHA512; also the ML-DSA component's context. */
static const char COMPOSITE_LABEL[] = "COMPSIG-MLDSA65-Ed25519-SHA512";
#define PREFIX_LEN (sizeof COMPOSITE_PREFIX - 1)
#define LABEL_LEN (sizeof COMPOSITE_LABEL - 1)
#define MPRIME_MAX (PREFIX_LEN + LABEL_LEN + 1 + 255 + 64)

/* M' = Prefix || Label || len(ctx) || ctx || SHA-512(M). */
static int composite_mprime(const uint8_t *msg, size_t len, const uint8_t *ctx, size_t ctxlen,
                            uint8_t out[MPRIME_MAX], size_t *outlen) {
  size_t off = 0;
  memcpy(out, COMPOSITE_PREFIX, PREFIX_LEN);
  off += PREFIX_LEN;
  memcpy(out + off, COMPOSITE_LABEL, LABEL_LEN);
  off += LABEL_LEN;
  out[off++] = (uint8_t)ctxlen;
  if (ctxlen) memcpy(out + off, ctx, ctxlen);
  off += ctxlen;
  if (sha2(512, msg, len, out + off) != 0) return -1;
  *outlen = off + 64;
  return 0;
}

int composite_keygen(const uint8_t secret[COMPOSITE_SECRET_BYTES], uint8_t pk[COMPOSITE_PK_BYTES],
                     uint8_t mldsa_sk[COMPOSITE_MLDSA_SK_BYTES]) {
  const mldsa_params *p = mldsa_params_by_level(65);
  if (mldsa_keygen(p, secret, pk, mldsa_sk) != 0) return -1;
  return ed25519_public(secret + 32, pk + p->pk_bytes);
}

int composite_sign(const uint8_t secret[COMPOSITE_SECRET_BYTES],
                   const uint8_t mldsa_sk[COMPOSITE_MLDSA_SK_BYTES], const uint8_t *msg,
                   size_t len, const uint8_t *ctx, size_t ctxlen, const uint8_t rnd[32],
                   uint8_t sig[COMPOSITE_SIG_BYTES]) {
  if (ctxlen > 255) return -2;
  const mldsa_params *p = mldsa_params_by_level(65);
  uint8_t mp[MPRIME_MAX];
  size_t mplen;
  if (composite_mprime(msg, len, ctx, ctxlen, mp, &mplen) != 0) return -1;
  if (mldsa_sign(p, mldsa_sk, mp, mplen, (const uint8_t *)COMPOSITE_LABEL, LABEL_LEN, rnd, sig) !=
      0)
    return -1;
  return ed25519_sign(secret + 32, mp, mplen, sig + p->sig_bytes);
}

int composite_verify(const uint8_t *pk, size_t pklen, const uint8_t *msg, size_t len,
                     const uint8_t *ctx, size_t ctxlen, const uint8_t *sig, size_t siglen) {
  if (pklen != COMPOSITE_PK_BYTES || siglen != COMPOSITE_SIG_BYTES || ctxlen > 255) return 0;
  const mldsa_params *p = mldsa_params_by_level(65);
  uint8_t mp[MPRIME_MAX];
  size_t mplen;
  if (composite_mprime(msg, len, ctx, ctxlen, mp, &mplen) != 0) return -1;
  int a = mldsa_verify(p, pk, p->pk_bytes, mp, mplen, (const uint8_t *)COMPOSITE_LABEL, LABEL_LEN,
                       sig, p->sig_bytes);
  /* Both components are always checked; either failing fails the composite. */
  int b = ed25519_verify(pk + p->pk_bytes, mp, mplen, sig + p->sig_bytes, ED25519_SIG_BYTES);
  if (a < 0 || b < 0) return -1;
  return a == 1 && b == 1;
}
