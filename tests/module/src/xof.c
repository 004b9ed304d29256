#include "xof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static EVP_MD *md_shake128;
static EVP_MD *md_shake256;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

/* Fetching by name on every use costs a provider lookup; fetch once per process. */
static void fetch_mds(void) {
  md_shake128 = EVP_MD_fetch(NULL, "SHAKE128", NULL);
  md_shake256 = EVP_MD_fetch(NULL, "SHAKE256", NULL);
}

int xof_init(xof_stream *xs, enum xof_kind kind, size_t first_squeeze) {
  memset(xs, 0, sizeof *xs);
  xs->first = first_squeeze ? first_squeeze : 168;
  pthread_once(&md_once, fetch_mds);
  EVP_MD *md = kind == XOF_SHAKE128 ? md_shake128 : md_shake256;
  if (md == NULL) return -1;
  xs->absorbed = EVP_MD_CTX_new();
  if (xs->absorbed == NULL || EVP_DigestInit_ex(xs->absorbed, md, NULL) != 1) {
    xof_free(xs);
    xs->failed = 1;
    return -1;
  }
  return 0;
}

void xof_absorb(xof_stream *xs, const void *data, size_t len) {
  if (xs->failed || len == 0) return;
  if (EVP_DigestUpdate(xs->absorbed, data, len) != 1) xs->failed = 1;
}

/* SHAKE output is prefix-consistent, so squeezing a longer output from a copy of the absorbed
 * state extends what was handed out before. */
static int grow(xof_stream *xs, size_t need) {
  size_t target = xs->len ? 2 * xs->len : xs->first;
  while (target < need) target *= 2;
  uint8_t *nb = malloc(target);
  EVP_MD_CTX *tmp = EVP_MD_CTX_new();
  int ok = nb != NULL && tmp != NULL && EVP_MD_CTX_copy_ex(tmp, xs->absorbed) == 1 &&
           EVP_DigestFinalXOF(tmp, nb, target) == 1;
  EVP_MD_CTX_free(tmp);
  if (!ok) {
    free(nb);
    return -1;
  }
  if (xs->buf) {
    OPENSSL_cleanse(xs->buf, xs->len);
    free(xs->buf);
  }
  xs->buf = nb;
  xs->len = target;
  return 0;
}

int xof_squeeze(xof_stream *xs, uint8_t *out, size_t n) {
  if (xs->failed) return -1;
  if (xs->pos + n > xs->len && grow(xs, xs->pos + n) != 0) {
    xs->failed = 1;
    return -1;
  }
  memcpy(out, xs->buf + xs->pos, n);
  xs->pos += n;
  return 0;
}

void xof_free(xof_stream *xs) {
  EVP_MD_CTX_free(xs->absorbed);
  if (xs->buf) {
    OPENSSL_cleanse(xs->buf, xs->len);
    free(xs->buf);
  }
  xs->absorbed = NULL;
  xs->buf = NULL;
  xs->len = xs->pos = 0;
}

int shake256_pieces(uint8_t *out, size_t outlen, const void *a, size_t alen, const void *b,
                    size_t blen, const void *c, size_t clen, const void *d, size_t dlen) {
  pthread_once(&md_once, fetch_mds);
  if (md_shake256 == NULL) return -1;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx != NULL && EVP_DigestInit_ex(ctx, md_shake256, NULL) == 1 &&
           (a == NULL || EVP_DigestUpdate(ctx, a, alen) == 1) &&
           (b == NULL || EVP_DigestUpdate(ctx, b, blen) == 1) &&
           (c == NULL || EVP_DigestUpdate(ctx, c, clen) == 1) &&
           (d == NULL || EVP_DigestUpdate(ctx, d, dlen) == 1) &&
           EVP_DigestFinalXOF(ctx, out, outlen) == 1;
  EVP_MD_CTX_free(ctx);
  return ok ? 0 : -1;
}
