/* ML-DSA per FIPS 204 (August 2024), written from the standard's algorithms: the parameter sets,
 * the key and signature encodings, key generation, signing and verification, on the ring of
 * mldsa_poly.c. */
#include "mldsa.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "mldsa_poly.h"
#include "xof.h"

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

/* ---- key, signature encodings (Algorithms 22-28) -------------------------------------------- */

static int eta_bits(const mldsa_params *p) { return bitlen((uint32_t)(2 * p->eta)); }
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
  poly_tables_init();
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
