/* ML-DSA (FIPS 204) parameter sets and sizes: what the scheme (mldsa.c) and its ring arithmetic
 * (mldsa_poly.c) both read, in a header of its own so that neither includes the other's. */
#ifndef SVCMOD_MLDSA_PARAMS_H
#define SVCMOD_MLDSA_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#define MLDSA_SEED_BYTES 32
#define MLDSA_RND_BYTES 32
#define MLDSA_MU_BYTES 64
#define MLDSA_MAX_CONTEXT 255
#define MLDSA_MAX_PK_BYTES 2592
#define MLDSA_MAX_SK_BYTES 4896
#define MLDSA_MAX_SIG_BYTES 4627

typedef struct {
  const char *name; /* "ML-DSA-65" */
  int k, l, eta, tau, beta, omega;
  int32_t gamma1, gamma2;
  size_t ctilde_bytes; /* lambda / 4 */
  size_t pk_bytes, sk_bytes, sig_bytes;
} mldsa_params;

#endif
