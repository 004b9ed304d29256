/* ML-DSA per FIPS 204 (August 2024), written from the standard's algorithms. Coefficients are kept
 * in [0, q) and reduced with plain 64-bit arithmetic: clarity over speed, this is a test module. */
#include "mldsa.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xof.h"

#define N 256
#define Q 8380417
#define D 13

typedef struct {
  int32_t c[N];
} poly;

static const mldsa_params PARAMS[3] = {
    {"ML-DSA-44", 4, 4, 2, 39, 78, 80, 1 << 17, (Q - 1) / 88, 32, 1312, 2560, 2420},
    {"ML-DSA-65", 6, 5, 4, 49, 196, 55, 1 << 19, (Q - 1) / 32, 48, 1952, 4032, 3309},
    {"ML-DSA-87", 8, 7, 2, 60, 120, 75, 1 << 19, (Q - 1) / 32, 64, 2592, 4896, 4627},
};

const mldsa_params *mldsa_params_by_level(int level) {
  switch (level) {
    case 44: return &PARAMS[0];
    case 65: return &PARAMS[1];
    case 87: return &PARAMS[2];
    default: return NULL;
  }
}

/* ---- arithmetic mod q ---------------------------------------------------------------------- */

static int32_t mulq(int32_t a, int32_t b) { return (int32_t)(((uint64_t)a * (uint64_t)b) % Q); }
static int32_t addq(int32_t a, int32_t b) {
  int32_t s = a + b;
  return s >= Q ? s - Q : s;
}
static int32_t subq(int32_t a, int32_t b) {
  int32_t s = a - b;
  return s < 0 ? s + Q : s;
}
/* Any int32 to its representative in [0, q). */
static int32_t freeze(int32_t a) {
  a %= Q;
  return a < 0 ? a + Q : a;
}
/* [0, q) to the centred representative in (-(q-1)/2, (q-1)/2]. */
static int32_t centre(int32_t a) { return a > (Q - 1) / 2 ? a - Q : a; }
static int32_t absv(int32_t a) { return a < 0 ? -a : a; }

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

/* Algorithm 41. */
static void poly_ntt(poly *w) {
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
static void poly_invntt(poly *w) {
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

static void poly_pointwise_acc(poly *acc, const poly *a, const poly *b) {
  for (unsigned j = 0; j < N; j++) acc->c[j] = addq(acc->c[j], mulq(a->c[j], b->c[j]));
}
static void poly_pointwise(poly *r, const poly *a, const poly *b) {
  for (unsigned j = 0; j < N; j++) r->c[j] = mulq(a->c[j], b->c[j]);
}

static int32_t poly_norm(const poly *a) {
  int32_t m = 0;
  for (unsigned j = 0; j < N; j++) {
    int32_t v = absv(centre(a->c[j]));
    if (v > m) m = v;
  }
  return m;
}

/* ---- rounding (Algorithms 35-40) ----------------------------------------------------------- */

static void power2round(int32_t r, int32_t *r1, int32_t *r0) {
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

static int32_t highbits(int32_t r, int32_t g2) {
  int32_t r1, r0;
  decompose(r, g2, &r1, &r0);
  return r1;
}

static int32_t lowbits(int32_t r, int32_t g2) {
  int32_t r1, r0;
  decompose(r, g2, &r1, &r0);
  return r0;
}

static int32_t usehint(int h, int32_t r, int32_t g2) {
  int32_t m = (Q - 1) / (2 * g2), r1, r0;
  decompose(r, g2, &r1, &r0);
  if (!h) return r1;
  return r0 > 0 ? (r1 + 1) % m : (r1 - 1 + m) % m;
}

/* ---- bit packing (Algorithms 16-21): little-endian bit order ------------------------------- */

static void pack_bits(uint8_t *out, const uint32_t v[N], int bits) {
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

static void unpack_bits(uint32_t v[N], const uint8_t *in, int bits) {
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

static int bitlen(uint32_t x) {
  int n = 0;
  while (x) {
    n++;
    x >>= 1;
  }
  return n;
}

/* BitPack(w, a, b): each coefficient (centred, in [-a, b]) stored as b - w. */
static size_t pack_signed(uint8_t *out, const poly *w, int32_t b, int bits) {
  uint32_t v[N];
  for (unsigned i = 0; i < N; i++) v[i] = (uint32_t)(b - centre(w->c[i]));
  pack_bits(out, v, bits);
  OPENSSL_cleanse(v, sizeof v);
  return (size_t)bits * 32;
}

static size_t unpack_signed(poly *w, const uint8_t *in, int32_t b, int bits) {
  uint32_t v[N];
  unpack_bits(v, in, bits);
  for (unsigned i = 0; i < N; i++) w->c[i] = freeze(b - (int32_t)v[i]);
  OPENSSL_cleanse(v, sizeof v);
  return (size_t)bits * 32;
}

static int eta_bits(const mldsa_params *p) { return bitlen((uint32_t)(2 * p->eta)); }
static int z_bits(const mldsa_params *p) { return 1 + bitlen((uint32_t)(p->gamma1 - 1)); }
static int w1_bits(const mldsa_params *p) {
  return bitlen((uint32_t)((Q - 1) / (2 * p->gamma2) - 1));
}

static size_t w1_encode(const mldsa_params *p, uint8_t *out, const poly *w1) {
  int bits = w1_bits(p);
  uint32_t v[N];
  size_t off = 0;
  for (int i = 0; i < p->k; i++) {
    for (unsigned j = 0; j < N; j++) v[j] = (uint32_t)w1[i].c[j];
    pack_bits(out + off, v, bits);
    off += (size_t)bits * 32;
  }
  return off;
}

/* ---- sampling (Algorithms 29-34) ------------------------------------------------------------ */

static int sample_in_ball(poly *c, const uint8_t *ctilde, size_t ctlen, int tau) {
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

static int expand_a(const mldsa_params *p, const uint8_t rho[32], poly *A) {
  for (int r = 0; r < p->k; r++)
    for (int s = 0; s < p->l; s++)
      if (rej_ntt_poly(&A[r * p->l + s], rho, (uint8_t)s, (uint8_t)r) != 0) return -1;
  return 0;
}

static int expand_s(const mldsa_params *p, const uint8_t rho[64], poly *s1, poly *s2) {
  for (int r = 0; r < p->l; r++)
    if (rej_bounded_poly(&s1[r], rho, (uint16_t)r, p->eta) != 0) return -1;
  for (int r = 0; r < p->k; r++)
    if (rej_bounded_poly(&s2[r], rho, (uint16_t)(r + p->l), p->eta) != 0) return -1;
  return 0;
}

static int expand_mask(const mldsa_params *p, const uint8_t rho[64], uint16_t kappa, poly *y) {
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

/* ---- key, signature encodings (Algorithms 22-28) -------------------------------------------- */

static void pk_encode(const mldsa_params *p, uint8_t *pk, const uint8_t rho[32], const poly *t1) {
  memcpy(pk, rho, 32);
  uint32_t v[N];
  for (int i = 0; i < p->k; i++) {
    for (unsigned j = 0; j < N; j++) v[j] = (uint32_t)t1[i].c[j];
    pack_bits(pk + 32 + 320 * i, v, 10);
  }
}

static void pk_decode(const mldsa_params *p, const uint8_t *pk, poly *t1) {
  uint32_t v[N];
  for (int i = 0; i < p->k; i++) {
    unpack_bits(v, pk + 32 + 320 * i, 10);
    for (unsigned j = 0; j < N; j++) t1[i].c[j] = (int32_t)v[j];
  }
}

static void sk_encode(const mldsa_params *p, uint8_t *sk, const uint8_t rho[32],
                      const uint8_t key[32], const uint8_t tr[64], const poly *s1, const poly *s2,
                      const poly *t0) {
  memcpy(sk, rho, 32);
  memcpy(sk + 32, key, 32);
  memcpy(sk + 64, tr, 64);
  size_t off = 128;
  for (int i = 0; i < p->l; i++) off += pack_signed(sk + off, &s1[i], p->eta, eta_bits(p));
  for (int i = 0; i < p->k; i++) off += pack_signed(sk + off, &s2[i], p->eta, eta_bits(p));
  for (int i = 0; i < p->k; i++) off += pack_signed(sk + off, &t0[i], 1 << (D - 1), D);
}

static void sk_decode(const mldsa_params *p, const uint8_t *sk, poly *s1, poly *s2, poly *t0) {
  size_t off = 128;
  for (int i = 0; i < p->l; i++) off += unpack_signed(&s1[i], sk + off, p->eta, eta_bits(p));
  for (int i = 0; i < p->k; i++) off += unpack_signed(&s2[i], sk + off, p->eta, eta_bits(p));
  for (int i = 0; i < p->k; i++) off += unpack_signed(&t0[i], sk + off, 1 << (D - 1), D);
}

static void sig_encode(const mldsa_params *p, uint8_t *sig, const uint8_t *ctilde, const poly *z,
                       const poly *h) {
  memcpy(sig, ctilde, p->ctilde_bytes);
  size_t off = p->ctilde_bytes;
  for (int i = 0; i < p->l; i++) off += pack_signed(sig + off, &z[i], p->gamma1, z_bits(p));
  uint8_t *y = sig + off;
  memset(y, 0, (size_t)(p->omega + p->k));
  int index = 0;
  for (int i = 0; i < p->k; i++) {
    for (unsigned j = 0; j < N; j++)
      if (h[i].c[j]) y[index++] = (uint8_t)j;
    y[p->omega + i] = (uint8_t)index;
  }
}

/* Returns 0, or -1 when the hint encoding is malformed (HintBitUnpack's ⊥). */
static int sig_decode(const mldsa_params *p, const uint8_t *sig, poly *z, poly *h) {
  size_t off = p->ctilde_bytes;
  for (int i = 0; i < p->l; i++) off += unpack_signed(&z[i], sig + off, p->gamma1, z_bits(p));
  const uint8_t *y = sig + off;
  memset(h, 0, sizeof(poly) * (size_t)p->k);
  int index = 0;
  for (int i = 0; i < p->k; i++) {
    int end = y[p->omega + i];
    if (end < index || end > p->omega) return -1;
    int first = index;
    while (index < end) {
      if (index > first && y[index - 1] >= y[index]) return -1;
      h[i].c[y[index]] = 1;
      index++;
    }
  }
  for (int i = index; i < p->omega; i++)
    if (y[i] != 0) return -1;
  return 0;
}

/* ---- the three operations ----------------------------------------------------------------- */

/* Scratch space sized for the largest parameter set, on the heap: ML-DSA-87's matrix alone is
 * 56 KiB, too much for small thread stacks. */
typedef struct {
  poly A[8 * 7];
  poly s1[7], s2[8], t0[8], t1[8];
  poly y[7], z[7], w[8], w1[8], h[8];
  poly c, tmp;
  uint8_t w1enc[8 * 32 * 6];
} work;

static work *work_new(void) {
  pthread_once(&zetas_once, compute_zetas);
  return calloc(1, sizeof(work));
}

static void work_free(work *wk) {
  if (wk == NULL) return;
  OPENSSL_cleanse(wk, sizeof *wk);
  free(wk);
}

int mldsa_keygen(const mldsa_params *p, const uint8_t seed[MLDSA_SEED_BYTES], uint8_t *pk,
                 uint8_t *sk) {
  work *wk = work_new();
  if (wk == NULL) return -1;
  uint8_t in[34], h[128], tr[64];
  memcpy(in, seed, 32);
  in[32] = (uint8_t)p->k;
  in[33] = (uint8_t)p->l;
  int rc = shake256_pieces(h, 128, in, 34, NULL, 0, NULL, 0, NULL, 0);
  const uint8_t *rho = h, *rhop = h + 32, *key = h + 96;
  if (rc == 0) rc = expand_a(p, rho, wk->A);
  if (rc == 0) rc = expand_s(p, rhop, wk->s1, wk->s2);
  if (rc == 0) {
    poly *s1hat = wk->y; /* reuse */
    for (int j = 0; j < p->l; j++) {
      s1hat[j] = wk->s1[j];
      poly_ntt(&s1hat[j]);
    }
    for (int i = 0; i < p->k; i++) {
      poly *t = &wk->w[i];
      memset(t, 0, sizeof *t);
      for (int j = 0; j < p->l; j++) poly_pointwise_acc(t, &wk->A[i * p->l + j], &s1hat[j]);
      poly_invntt(t);
      for (unsigned n = 0; n < N; n++) {
        int32_t r1, r0;
        power2round(addq(t->c[n], wk->s2[i].c[n]), &r1, &r0);
        wk->t1[i].c[n] = r1;
        wk->t0[i].c[n] = freeze(r0);
      }
    }
    pk_encode(p, pk, rho, wk->t1);
    rc = shake256_pieces(tr, 64, pk, p->pk_bytes, NULL, 0, NULL, 0, NULL, 0);
  }
  if (rc == 0) sk_encode(p, sk, rho, key, tr, wk->s1, wk->s2, wk->t0);
  OPENSSL_cleanse(h, sizeof h);
  OPENSSL_cleanse(in, sizeof in);
  work_free(wk);
  return rc;
}

/* M' = 0 || |ctx| || ctx, followed by the message: hashed in pieces to avoid copying the message. */
static size_t message_prefix(uint8_t pre[2 + MLDSA_MAX_CONTEXT], const uint8_t *ctx, size_t ctxlen) {
  pre[0] = 0;
  pre[1] = (uint8_t)ctxlen;
  if (ctxlen) memcpy(pre + 2, ctx, ctxlen);
  return 2 + ctxlen;
}

/* One attempt of the rejection loop of Algorithm 7; returns 1 accepted, 0 rejected, -1 error. */
static int sign_attempt(const mldsa_params *p, work *wk, const uint8_t mu[64],
                        const uint8_t rhopp[64], uint16_t kappa, uint8_t *ctilde) {
  if (expand_mask(p, rhopp, kappa, wk->y) != 0) return -1;
  poly *yhat = wk->z; /* z is computed after yhat is no longer needed */
  for (int j = 0; j < p->l; j++) {
    yhat[j] = wk->y[j];
    poly_ntt(&yhat[j]);
  }
  for (int i = 0; i < p->k; i++) {
    memset(&wk->w[i], 0, sizeof(poly));
    for (int j = 0; j < p->l; j++) poly_pointwise_acc(&wk->w[i], &wk->A[i * p->l + j], &yhat[j]);
    poly_invntt(&wk->w[i]);
    for (unsigned n = 0; n < N; n++) wk->w1[i].c[n] = highbits(wk->w[i].c[n], p->gamma2);
  }
  size_t enclen = w1_encode(p, wk->w1enc, wk->w1);
  if (shake256_pieces(ctilde, p->ctilde_bytes, mu, 64, wk->w1enc, enclen, NULL, 0, NULL, 0) != 0)
    return -1;
  if (sample_in_ball(&wk->c, ctilde, p->ctilde_bytes, p->tau) != 0) return -1;
  poly_ntt(&wk->c);
  for (int j = 0; j < p->l; j++) {
    poly_pointwise(&wk->tmp, &wk->c, &wk->s1[j]);
    poly_invntt(&wk->tmp);
    for (unsigned n = 0; n < N; n++) wk->z[j].c[n] = addq(wk->y[j].c[n], wk->tmp.c[n]);
    if (poly_norm(&wk->z[j]) >= p->gamma1 - p->beta) return 0;
  }
  int ones = 0;
  for (int i = 0; i < p->k; i++) {
    poly_pointwise(&wk->tmp, &wk->c, &wk->s2[i]);
    poly_invntt(&wk->tmp);
    poly *wcs2 = &wk->w[i]; /* w - cs2, in place */
    for (unsigned n = 0; n < N; n++) {
      wcs2->c[n] = subq(wcs2->c[n], wk->tmp.c[n]);
      if (absv(lowbits(wcs2->c[n], p->gamma2)) >= p->gamma2 - p->beta) return 0;
    }
    poly_pointwise(&wk->tmp, &wk->c, &wk->t0[i]);
    poly_invntt(&wk->tmp);
    if (poly_norm(&wk->tmp) >= p->gamma2) return 0;
    for (unsigned n = 0; n < N; n++) {
      int32_t with_ct0 = addq(wcs2->c[n], wk->tmp.c[n]);
      int hint = highbits(with_ct0, p->gamma2) != highbits(wcs2->c[n], p->gamma2);
      wk->h[i].c[n] = hint;
      ones += hint;
    }
  }
  return ones <= p->omega ? 1 : 0;
}

int mldsa_sign(const mldsa_params *p, const uint8_t *sk, const uint8_t *msg, size_t msglen,
               const uint8_t *ctx, size_t ctxlen, const uint8_t rnd[MLDSA_RND_BYTES],
               uint8_t *sig) {
  if (ctxlen > MLDSA_MAX_CONTEXT) return -2;
  uint8_t pre[2 + MLDSA_MAX_CONTEXT], mu[MLDSA_MU_BYTES];
  size_t prelen = message_prefix(pre, ctx, ctxlen);
  const uint8_t *tr = sk + 64;
  int rc = shake256_pieces(mu, 64, tr, 64, pre, prelen, msg, msglen, NULL, 0);
  if (rc == 0) rc = mldsa_sign_mu(p, sk, mu, rnd, sig);
  OPENSSL_cleanse(mu, sizeof mu);
  return rc;
}

int mldsa_sign_mu(const mldsa_params *p, const uint8_t *sk, const uint8_t mu[MLDSA_MU_BYTES],
                  const uint8_t rnd[MLDSA_RND_BYTES], uint8_t *sig) {
  work *wk = work_new();
  if (wk == NULL) return -1;
  uint8_t rhopp[64], ctilde[64];
  const uint8_t *rho = sk, *key = sk + 32;
  sk_decode(p, sk, wk->s1, wk->s2, wk->t0);
  for (int j = 0; j < p->l; j++) poly_ntt(&wk->s1[j]);
  for (int i = 0; i < p->k; i++) {
    poly_ntt(&wk->s2[i]);
    poly_ntt(&wk->t0[i]);
  }
  int rc = expand_a(p, rho, wk->A);
  if (rc == 0) rc = shake256_pieces(rhopp, 64, key, 32, rnd, 32, mu, 64, NULL, 0);
  for (uint32_t kappa = 0; rc == 0; kappa += (uint32_t)p->l) {
    /* kappa is a 16-bit counter in the standard; reaching 2^16 would take ~10^4 rejections. */
    if (kappa > 0xffff - (uint32_t)p->l) {
      rc = -1;
      break;
    }
    int got = sign_attempt(p, wk, mu, rhopp, (uint16_t)kappa, ctilde);
    if (got < 0) rc = -1;
    if (got == 1) break;
  }
  if (rc == 0) sig_encode(p, sig, ctilde, wk->z, wk->h);
  OPENSSL_cleanse(rhopp, sizeof rhopp);
  work_free(wk);
  return rc;
}

int mldsa_verify(const mldsa_params *p, const uint8_t *pk, size_t pklen, const uint8_t *msg,
                 size_t msglen, const uint8_t *ctx, size_t ctxlen, const uint8_t *sig,
                 size_t siglen) {
  if (pklen != p->pk_bytes || siglen != p->sig_bytes || ctxlen > MLDSA_MAX_CONTEXT) return 0;
  uint8_t pre[2 + MLDSA_MAX_CONTEXT], tr[64], mu[MLDSA_MU_BYTES];
  size_t prelen = message_prefix(pre, ctx, ctxlen);
  if (shake256_pieces(tr, 64, pk, pklen, NULL, 0, NULL, 0, NULL, 0) != 0) return -1;
  if (shake256_pieces(mu, 64, tr, 64, pre, prelen, msg, msglen, NULL, 0) != 0) return -1;
  return mldsa_verify_mu(p, pk, pklen, mu, sig, siglen);
}

int mldsa_verify_mu(const mldsa_params *p, const uint8_t *pk, size_t pklen,
                    const uint8_t mu[MLDSA_MU_BYTES], const uint8_t *sig, size_t siglen) {
  if (pklen != p->pk_bytes || siglen != p->sig_bytes) return 0;
  work *wk = work_new();
  if (wk == NULL) return -1;
  uint8_t ctilde2[64];
  int result = 0;
  pk_decode(p, pk, wk->t1);
  if (sig_decode(p, sig, wk->z, wk->h) != 0) goto out;
  for (int j = 0; j < p->l; j++)
    if (poly_norm(&wk->z[j]) >= p->gamma1 - p->beta) goto out;
  result = -1;
  if (expand_a(p, pk, wk->A) != 0) goto out;
  if (sample_in_ball(&wk->c, sig, p->ctilde_bytes, p->tau) != 0) goto out;
  poly_ntt(&wk->c);
  for (int j = 0; j < p->l; j++) poly_ntt(&wk->z[j]);
  for (int i = 0; i < p->k; i++) {
    poly *acc = &wk->w[i];
    memset(acc, 0, sizeof *acc);
    for (int j = 0; j < p->l; j++) poly_pointwise_acc(acc, &wk->A[i * p->l + j], &wk->z[j]);
    for (unsigned n = 0; n < N; n++) wk->tmp.c[n] = mulq(wk->t1[i].c[n], 1 << D);
    poly_ntt(&wk->tmp);
    for (unsigned n = 0; n < N; n++) acc->c[n] = subq(acc->c[n], mulq(wk->c.c[n], wk->tmp.c[n]));
    poly_invntt(acc);
    for (unsigned n = 0; n < N; n++)
      wk->w1[i].c[n] = usehint(wk->h[i].c[n], acc->c[n], p->gamma2);
  }
  size_t enclen = w1_encode(p, wk->w1enc, wk->w1);
  if (shake256_pieces(ctilde2, p->ctilde_bytes, mu, 64, wk->w1enc, enclen, NULL, 0, NULL, 0) != 0)
    goto out;
  result = CRYPTO_memcmp(ctilde2, sig, p->ctilde_bytes) == 0 ? 1 : 0;
out:
  work_free(wk);
  return result;
}
