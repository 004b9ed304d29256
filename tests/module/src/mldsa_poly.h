/* ML-DSA's ring R_q = Z_q[X]/(X^256 + 1) (FIPS 204): arithmetic mod q, the NTT, rounding, bit
 * packing and sampling polynomials from SHAKE. Internal to the ML-DSA core: mldsa.c builds key
 * generation, signing and verification on it. */
#ifndef SVCMOD_MLDSA_POLY_H
#define SVCMOD_MLDSA_POLY_H

#include <stddef.h>
#include <stdint.h>

#include "mldsa_params.h"

#define N 256
#define Q 8380417
#define D 13

/* Coefficients in [0, q). */
typedef struct {
  int32_t c[N];
} poly;

/* Inline: the NTT and every coefficient loop on both sides of the split call these. */
static inline int32_t mulq(int32_t a, int32_t b) {
  return (int32_t)(((uint64_t)a * (uint64_t)b) % Q);
}
static inline int32_t addq(int32_t a, int32_t b) {
  int32_t s = a + b;
  return s >= Q ? s - Q : s;
}
static inline int32_t subq(int32_t a, int32_t b) {
  int32_t s = a - b;
  return s < 0 ? s + Q : s;
}
/* Any int32 to its representative in [0, q). */
static inline int32_t freeze(int32_t a) {
  a %= Q;
  return a < 0 ? a + Q : a;
}
/* [0, q) to the centred representative in (-(q-1)/2, (q-1)/2]. */
static inline int32_t centre(int32_t a) { return a > (Q - 1) / 2 ? a - Q : a; }
static inline int32_t absv(int32_t a) { return a < 0 ? -a : a; }

/* Computes the NTT's roots of unity once per process; call before the first poly_ntt. */
void poly_tables_init(void);
/* Algorithms 41 and 42, in place. */
void poly_ntt(poly *w);
void poly_invntt(poly *w);
/* acc += a * b, and r = a * b, coefficient by coefficient (NTT domain). */
void poly_pointwise_acc(poly *acc, const poly *a, const poly *b);
void poly_pointwise(poly *r, const poly *a, const poly *b);
/* The infinity norm of the centred coefficients. */
int32_t poly_norm(const poly *a);

/* Rounding (Algorithms 35-40); g2 is gamma2. */
void power2round(int32_t r, int32_t *r1, int32_t *r0);
int32_t highbits(int32_t r, int32_t g2);
int32_t lowbits(int32_t r, int32_t g2);
int32_t usehint(int h, int32_t r, int32_t g2);

/* Bit packing (Algorithms 16-21), little-endian bit order: 256 values of `bits` bits each. */
void pack_bits(uint8_t *out, const uint32_t v[N], int bits);
void unpack_bits(uint32_t v[N], const uint8_t *in, int bits);
/* Bits needed to write x. */
int bitlen(uint32_t x);
/* BitPack(w, a, b) and BitUnpack: each coefficient (centred, in [-a, b]) stored as b - w. Both
 * return the bytes written or read. */
size_t pack_signed(uint8_t *out, const poly *w, int32_t b, int bits);
size_t unpack_signed(poly *w, const uint8_t *in, int32_t b, int bits);
/* Bits of one coefficient of the mask y and of z. */
int z_bits(const mldsa_params *p);

/* Sampling (Algorithms 29-34). Each returns 0, or -1 on a libcrypto failure. */
int sample_in_ball(poly *c, const uint8_t *ctilde, size_t ctlen, int tau);
/* The k x l matrix A-hat, row by row. */
int expand_a(const mldsa_params *p, const uint8_t rho[32], poly *A);
int expand_s(const mldsa_params *p, const uint8_t rho[64], poly *s1, poly *s2);
int expand_mask(const mldsa_params *p, const uint8_t rho[64], uint16_t kappa, poly *y);

#endif
