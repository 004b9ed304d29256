/* ML-DSA (FIPS 204): key generation from a seed, signing with a context, verification. */
#ifndef SVCMOD_MLDSA_H
#define SVCMOD_MLDSA_H

#include <stddef.h>
#include <stdint.h>

#include "mldsa_params.h"


/* Parameters by FIPS 204 category name: 44, 65 or 87; NULL for anything else. */
const mldsa_params *mldsa_params_by_level(int level);

/* KeyGen_internal(xi): writes pk (pk_bytes) and sk (sk_bytes). Returns 0, or -1 on a libcrypto
 * failure. */
int mldsa_keygen(const mldsa_params *p, const uint8_t seed[MLDSA_SEED_BYTES], uint8_t *pk,
                 uint8_t *sk);

/* ML-DSA.Sign with M' = 0 || |ctx| || ctx || msg and the given rnd (all zero = deterministic).
 * Returns 0, -1 on a libcrypto failure, -2 when ctx is longer than 255 bytes. */
int mldsa_sign(const mldsa_params *p, const uint8_t *sk, const uint8_t *msg, size_t msglen,
               const uint8_t *ctx, size_t ctxlen, const uint8_t rnd[MLDSA_RND_BYTES], uint8_t *sig);

/* Algorithm 7 from line 7 on, given mu (line 6: SHAKE256(tr || M', 64), made by the caller): the
 * signature over the message mu was computed from. Returns 0, or -1 on a libcrypto failure. */
int mldsa_sign_mu(const mldsa_params *p, const uint8_t *sk, const uint8_t mu[MLDSA_MU_BYTES],
                  const uint8_t rnd[MLDSA_RND_BYTES], uint8_t *sig);

/* ML-DSA.Verify: 1 valid, 0 invalid (wrong lengths included), -1 on a libcrypto failure. */
int mldsa_verify(const mldsa_params *p, const uint8_t *pk, size_t pklen, const uint8_t *msg,
                 size_t msglen, const uint8_t *ctx, size_t ctxlen, const uint8_t *sig,
                 size_t siglen);

/* Algorithm 8 given mu instead of the message: 1 valid, 0 invalid, -1 on a libcrypto failure. */
int mldsa_verify_mu(const mldsa_params *p, const uint8_t *pk, size_t pklen,
                    const uint8_t mu[MLDSA_MU_BYTES], const uint8_t *sig, size_t siglen);

#endif
