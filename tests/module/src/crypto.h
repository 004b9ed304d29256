/* Classical primitives from libcrypto and the composite ML-DSA-65 + Ed25519 scheme. Byte-level
 * functions only: no PKCS#11 types. Verification functions answer 1 valid, 0 invalid, -1 error. */
#ifndef SVCMOD_CRYPTO_H
#define SVCMOD_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define ED25519_KEY_BYTES 32
#define ED25519_SIG_BYTES 64
#define P256_PRIV_BYTES 32
#define P256_POINT_BYTES 65 /* uncompressed: 04 || x || y */
#define P256_SIG_BYTES 64   /* r || s */

#define COMPOSITE_SECRET_BYTES 64 /* ML-DSA-65 seed || Ed25519 private key, as the draft's sk */
#define COMPOSITE_PK_BYTES (1952 + 32)
#define COMPOSITE_SIG_BYTES (3309 + 64)
#define COMPOSITE_MLDSA_SK_BYTES 4032

int random_bytes(uint8_t *out, size_t n);

int ed25519_public(const uint8_t priv[ED25519_KEY_BYTES], uint8_t pub[ED25519_KEY_BYTES]);
int ed25519_sign(const uint8_t priv[ED25519_KEY_BYTES], const uint8_t *msg, size_t len,
                 uint8_t sig[ED25519_SIG_BYTES]);
int ed25519_verify(const uint8_t pub[ED25519_KEY_BYTES], const uint8_t *msg, size_t len,
                   const uint8_t *sig, size_t siglen);

int p256_keygen(uint8_t priv[P256_PRIV_BYTES], uint8_t pub[P256_POINT_BYTES]);
/* Checks that pub is a point of P-256 (uncompressed); 1 yes, 0 no. */
int p256_point_valid(const uint8_t *pub, size_t len);
/* Raw ECDSA over a caller-made digest (CKM_ECDSA); the signature is r || s. */
int p256_sign_digest(const uint8_t priv[P256_PRIV_BYTES], const uint8_t pub[P256_POINT_BYTES],
                     const uint8_t *digest, size_t len, uint8_t sig[P256_SIG_BYTES]);
int p256_verify_digest(const uint8_t pub[P256_POINT_BYTES], const uint8_t *digest, size_t len,
                       const uint8_t *sig, size_t siglen);

int sha2(int bits, const uint8_t *msg, size_t len, uint8_t *out);
int hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t len,
                uint8_t out[32]);
int pbkdf2_sha256(const uint8_t *pin, size_t pinlen, const uint8_t *salt, size_t saltlen,
                  unsigned iterations, uint8_t out[32]);

/* AES-256-GCM: sealed = iv(12) || ciphertext || tag(16). open returns 0, or -1 when the tag fails. */
#define SEAL_OVERHEAD 28
int seal(const uint8_t key[32], const uint8_t *aad, size_t aadlen, const uint8_t *plain,
         size_t len, uint8_t *sealed);
int unseal(const uint8_t key[32], const uint8_t *aad, size_t aadlen, const uint8_t *sealed,
           size_t sealedlen, uint8_t *plain);

/* Composite ML-DSA-65 + Ed25519 (draft-ietf-lamps-pq-composite-sigs-19,
 * id-MLDSA65-Ed25519-SHA512). keygen derives the public key (and the expanded ML-DSA secret key)
 * from the 64-byte secret. */
int composite_keygen(const uint8_t secret[COMPOSITE_SECRET_BYTES], uint8_t pk[COMPOSITE_PK_BYTES],
                     uint8_t mldsa_sk[COMPOSITE_MLDSA_SK_BYTES]);
/* Returns 0, -1 on failure, -2 when ctx is over 255 bytes. */
int composite_sign(const uint8_t secret[COMPOSITE_SECRET_BYTES],
                   const uint8_t mldsa_sk[COMPOSITE_MLDSA_SK_BYTES], const uint8_t *msg,
                   size_t len, const uint8_t *ctx, size_t ctxlen, const uint8_t rnd[32],
                   uint8_t sig[COMPOSITE_SIG_BYTES]);
int composite_verify(const uint8_t *pk, size_t pklen, const uint8_t *msg, size_t len,
                     const uint8_t *ctx, size_t ctxlen, const uint8_t *sig, size_t siglen);

#endif
