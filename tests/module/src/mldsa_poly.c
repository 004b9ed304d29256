/* ML-DSA's ring (FIPS 204, August 2024), written from the standard's algorithms. Coefficients are
 * kept in [0, q) and reduced with plain 64-bit arithmetic: clarity over speed, this is a test
 * module. */
#include "mldsa_poly.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <string.h>

#include "xof.h"

/* ---- the NTT (Algorithms 41-42) ------------------------------------------------------------- */

static int32_t zetas[N];
static pthread_once_t zetas_once = PTHREAD_ONCE_INIT;

static unsigned bitrev8(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 8; i++) r |= ((x >> i) & 1u) << (7 - i);
  return r;
}

/* zetas[k] = 1753^BitRev8(k) mod q (FIPS 204 Appendix B). */
static void compute_zetas(void) {
  for (unsigned k = 0; k < N; k++) {
    int32_t z = 1;
    for (unsigned e = bitrev8(k); e > 0; e--) z = mulq(z, 1753);
    zetas[k] = z;
  }
}

void poly_tables_init(void) { pthread_once(&zetas_once, compute_zetas); }

/* Algorithm 41. */
void poly_ntt(poly *w) {
  unsigned m = 0;
  for (unsigned len = 128; len >= 1; len /= 2) {
    for (unsigned start = 0; start < N; start += 2 * len) {
      int32_t z = zetas[++m];
      for (unsigned j = start; j < start + len; j++) {
        int32_t t = mulq(z, w->c[j + len]);
        w->c[j + len] = subq(w->c[j], t);
        w->c[j] = addq(w->c[j], t);
      }
    }
  }
}

/* Algorithm 42. */
void poly_invntt(poly *w) {
  unsigned m = 256;
  for (unsigned len = 1; len < N; len *= 2) {
    for (unsigned start = 0; start < N; start += 2 * len) {
      int32_t z = Q - zetas[--m];
      for (unsigned j = start; j < start + len; j++) {
        int32_t t = w->c[j];
        w->c[j] = addq(t, w->c[j + len]);
        w->c[j + len] = mulq(z, subq(t, w->c[j + len]));
      }
    }
  }
  for (unsigned j = 0; j < N; j++) w->c[j] = mulq(8347681, w->c[j]);
}

void poly_pointwise_acc(poly *acc, const poly *a, const poly *b) {
  for (unsigned j = 0; j < N; j++) acc->c[j] = addq(acc->c[j], mulq(a->c[j], b->c[j]));
}
void poly_pointwise(poly *r, const poly *a, const poly *b) {
  for (unsigned j = 0; j < N; j++) r->c[j] = mulq(a->c[j], b->c[j]);
}

int32_t poly_norm(const poly *a) {
  int32_t m = 0;
  for (unsigned j = 0; j < N; j++) {
    int32_t v = absv(centre(a->c[j]));
    if (v > m) m = v;
  }
  return m;
}

/* ---- rounding (Algorithms 35-40) ----------------------------------------------------------- */

void power2round(int32_t r, int32_t *r1, int32_t *r0) {
  int32_t lo = r & ((1 << D) - 1);
  if (lo > (1 << (D - 1))) lo -= 1 << D;
  *r1 = (r - lo) >> D;
  *r0 = lo;
}

static void decompose(int32_t r, int32_t g2, int32_t *r1, int32_t *r0) {
  int32_t lo = r % (2 * g2);
  if (lo > g2) lo -= 2 * g2;
  if (r - lo == Q - 1) {
    *r1 = 0;
    *r0 = lo - 1;
  } else {
    *r1 = (r - lo) / (2 * g2);
    *r0 = lo;
  }
}

int32_t highbits(int32_t r, int32_t g2) {
  int32_t r1, r0;
  decompose(r, g2, &r1, &r0);
  return r1;
}

int32_t lowbits(int32_t r, int32_t g2) {
  int32_t r1, r0;
  decompose(r, g2, &r1, &r0);
  return r0;
}

int32_t usehint(int h, int32_t r, int32_t g2) {
  int32_t m = (Q - 1) / (2 * g2), r1, r0;
  decompose(r, g2, &r1, &r0);
  if (!h) return r1;
  return r0 > 0 ? (r1 + 1) % m : (r1 - 1 + m) % m;
}

/* ---- bit packing (Algorithms 16-21): little-endian bit order ------------------------------- */

void pack_bits(uint8_t *out, const uint32_t v[N], int bits) {
  uint64_t acc = 0;
  int have = 0;
  for (unsigned i = 0; i < N; i++) {
    acc |= (uint64_t)v[i] << have;
    have += bits;
    while (have >= 8) {
      *out++ = (uint8_t)acc;
      acc >>= 8;
      have -= 8;
    }
  }
}

void unpack_bits(uint32_t v[N], const uint8_t *in, int bits) {
  uint64_t acc = 0;
  int have = 0;
  for (unsigned i = 0; i < N; i++) {
    while (have < bits) {
      acc |= (uint64_t)*in++ << have;
      have += 8;
    }
    v[i] = (uint32_t)(acc & ((1u << bits) - 1));
    acc >>= bits;
    have -= bits;
  }
}

int bitlen(uint32_t x) {
  int n = 0;
  while (x) {
    n++;
    x >>= 1;
  }
  return n;
}

/* BitPack(w, a, b): each coefficient (centred, in [-a, b]) stored as b - w. */
size_t pack_signed(uint8_t *out, const poly *w, int32_t b, int bits) {
  uint32_t v[N];
  for (unsigned i = 0; i < N; i++) v[i] = (uint32_t)(b - centre(w->c[i]));
  pack_bits(out, v, bits);
  OPENSSL_cleanse(v, sizeof v);
  return (size_t)bits * 32;
}

size_t unpack_signed(poly *w, const uint8_t *in, int32_t b, int bits) {
  uint32_t v[N];
  unpack_bits(v, in, bits);
  for (unsigned i = 0; i < N; i++) w->c[i] = freeze(b - (int32_t)v[i]);
  OPENSSL_cleanse(v, sizeof v);
  return (size_t)bits * 32;
}

int z_bits(const mldsa_params *p) { return 1 + bitlen((uint32_t)(p->gamma1 - 1)); }

/* ---- sampling (Algorithms 29-34) ------------------------------------------------------------ */

int sample_in_ball(poly *c, const uint8_t *ctilde, size_t ctlen, int tau) {
  xof_stream xs;
  if (xof_init(&xs, XOF_SHAKE256, 136) != 0) return -1;
  xof_absorb(&xs, ctilde, ctlen);
  uint8_t s[8];
  int rc = xof_squeeze(&xs, s, 8);
  uint64_t signs = 0;
  for (int i = 0; i < 8; i++) signs |= (uint64_t)s[i] << (8 * i);
  memset(c, 0, sizeof *c);
  for (int i = N - tau; i < N && rc == 0; i++) {
    uint8_t j;
    do {
      rc = xof_squeeze(&xs, &j, 1);
    } while (rc == 0 && j > i);
    if (rc != 0) break;
    c->c[i] = c->c[j];
    c->c[j] = (signs & 1) ? Q - 1 : 1;
    signs >>= 1;
  }
  xof_free(&xs);
  return rc;
}

static int rej_ntt_poly(poly *a, const uint8_t rho[32], uint8_t col, uint8_t row) {
  xof_stream xs;
  if (xof_init(&xs, XOF_SHAKE128, 5 * 168) != 0) return -1;
  uint8_t sfx[2] = {col, row};
  xof_absorb(&xs, rho, 32);
  xof_absorb(&xs, sfx, 2);
  int rc = 0;
  for (unsigned n = 0; n < N && rc == 0;) {
    uint8_t b[3];
    rc = xof_squeeze(&xs, b, 3);
    int32_t z = (int32_t)b[0] | ((int32_t)b[1] << 8) | ((int32_t)(b[2] & 0x7f) << 16);
    if (rc == 0 && z < Q) a->c[n++] = z;
  }
  xof_free(&xs);
  return rc;
}

static int coeff_from_half_byte(unsigned b, int eta, int32_t *out) {
  if (eta == 2 && b < 15) {
    *out = freeze(2 - (int32_t)(b % 5));
    return 1;
  }
  if (eta == 4 && b < 9) {
    *out = freeze(4 - (int32_t)b);
    return 1;
  }
  return 0;
}

static int rej_bounded_poly(poly *a, const uint8_t rho[64], uint16_t idx, int eta) {
  xof_stream xs;
  if (xof_init(&xs, XOF_SHAKE256, 3 * 136) != 0) return -1;
  uint8_t sfx[2] = {(uint8_t)idx, (uint8_t)(idx >> 8)};
  xof_absorb(&xs, rho, 64);
  xof_absorb(&xs, sfx, 2);
  int rc = 0;
  for (unsigned n = 0; n < N && rc == 0;) {
    uint8_t z;
    rc = xof_squeeze(&xs, &z, 1);
    if (rc != 0) break;
    int32_t v;
    if (coeff_from_half_byte(z & 15u, eta, &v)) a->c[n++] = v;
    if (n < N && coeff_from_half_byte(z >> 4, eta, &v)) a->c[n++] = v;
  }
  xof_free(&xs);
  return rc;
}

int expand_a(const mldsa_params *p, const uint8_t rho[32], poly *A) {
  for (int r = 0; r < p->k; r++)
    for (int s = 0; s < p->l; s++)
      if (rej_ntt_poly(&A[r * p->l + s], rho, (uint8_t)s, (uint8_t)r) != 0) return -1;
  return 0;
}

int expand_s(const mldsa_params *p, const uint8_t rho[64], poly *s1, poly *s2) {
  for (int r = 0; r < p->l; r++)
    if (rej_bounded_poly(&s1[r], rho, (uint16_t)r, p->eta) != 0) return -1;
  for (int r = 0; r < p->k; r++)
    if (rej_bounded_poly(&s2[r], rho, (uint16_t)(r + p->l), p->eta) != 0) return -1;
  return 0;
}

int expand_mask(const mldsa_params *p, const uint8_t rho[64], uint16_t kappa, poly *y) {
  int bits = z_bits(p);
  uint8_t buf[32 * 20];
  for (int r = 0; r < p->l; r++) {
    uint16_t v = (uint16_t)(kappa + r);
    uint8_t sfx[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    if (shake256_pieces(buf, (size_t)bits * 32, rho, 64, sfx, 2, NULL, 0, NULL, 0) != 0) return -1;
    unpack_signed(&y[r], buf, p->gamma1, bits);
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return 0;
}
