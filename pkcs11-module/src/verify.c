/* Local verification with libcrypto for the key types it knows (EC, RSA PSS and PKCS #1 v1.5, Ed25519); ML-DSA and
 * the composite are verified by the daemon (POST /verify). */
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <stdlib.h>

#include "verify.h"

/* r ‖ s → DER ECDSA-Sig-Value; returns its length, 0 on failure. */
static int ecdsa_der(const unsigned char *sig, size_t len, unsigned char **der) {
  ECDSA_SIG *s = ECDSA_SIG_new();
  BIGNUM *r = BN_bin2bn(sig, (int)(len / 2), NULL), *ss = BN_bin2bn(sig + len / 2, (int)(len / 2), NULL);
  int n = 0;
  if (s != NULL && r != NULL && ss != NULL && ECDSA_SIG_set0(s, r, ss) == 1) {
    r = ss = NULL;
    n = i2d_ECDSA_SIG(s, der);
  }
  BN_free(r);
  BN_free(ss);
  ECDSA_SIG_free(s);
  return n > 0 ? n : 0;
}

static CK_RV verify_digest(const remote_key *k, int md_nid, const unsigned char *dg, size_t dlen,
                           const unsigned char *sig, size_t sig_len) {
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(k->pkey, NULL);
  if (ctx == NULL || EVP_PKEY_verify_init(ctx) != 1) {
    EVP_PKEY_CTX_free(ctx);
    return CKR_HOST_MEMORY;
  }
  unsigned char *der = NULL;
  int ok = -1;
  if (k->type == KT_RSA_3072_PKCS1V15) {
    /* RSASSA-PKCS1-v1_5: libcrypto checks the DigestInfo of `md` around the digest. */
    if (EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 &&
        EVP_PKEY_CTX_set_signature_md(ctx, EVP_get_digestbynid(md_nid)) == 1)
      ok = EVP_PKEY_verify(ctx, sig, sig_len, dg, dlen);
  } else if (k->type == KT_RSA_3072) {
    const EVP_MD *md = EVP_get_digestbynid(md_nid);
    if (EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1 &&
        EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 && EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md) == 1 &&
        EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, EVP_MD_get_size(md)) == 1)
      ok = EVP_PKEY_verify(ctx, sig, sig_len, dg, dlen);
  } else {
    int n = ecdsa_der(sig, sig_len, &der);
    if (n > 0) ok = EVP_PKEY_verify(ctx, der, (size_t)n, dg, dlen);
  }
  OPENSSL_free(der);
  EVP_PKEY_CTX_free(ctx);
  return ok == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
}

static CK_RV verify_ed25519(const remote_key *k, const unsigned char *msg, size_t len,
                            const unsigned char *sig, size_t sig_len) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (ctx == NULL) return CKR_HOST_MEMORY;
  int ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1
               ? EVP_DigestVerify(ctx, sig, sig_len, msg, len)
               : -1;
  EVP_MD_CTX_free(ctx);
  return ok == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
}

CK_RV verify_local(const remote_key *k, int md_nid, const unsigned char *data, size_t len,
                   const unsigned char *sig, size_t sig_len) {
  if (k->pkey == NULL) return CKR_FUNCTION_FAILED;
  if (sig_len != key_signature_length(k)) return CKR_SIGNATURE_LEN_RANGE;
  if (k->type == KT_ED25519) return verify_ed25519(k, data, len, sig, sig_len);
  return verify_digest(k, md_nid, data, len, sig, sig_len);
}
