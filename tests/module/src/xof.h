/* SHAKE128/256 as a stream over libcrypto's one-shot XOF (OpenSSL 3.0 has no incremental squeeze). */
#ifndef SVCMOD_XOF_H
#define SVCMOD_XOF_H

#include <stddef.h>
#include <stdint.h>

typedef struct evp_md_ctx_st xof_evp_ctx;

/* An absorbed SHAKE state plus the bytes squeezed from it so far. */
typedef struct {
  xof_evp_ctx *absorbed; /* never finalised: copied each time more output is needed */
  uint8_t *buf;
  size_t len; /* bytes currently in buf */
  size_t pos; /* bytes already handed out */
  size_t first; /* size of the first squeeze: callers know roughly how much they need */
  int failed;
} xof_stream;

enum xof_kind { XOF_SHAKE128 = 128, XOF_SHAKE256 = 256 };

/* Starts a stream; returns 0 or -1 when libcrypto has no SHAKE. */
int xof_init(xof_stream *xs, enum xof_kind kind, size_t first_squeeze);
void xof_absorb(xof_stream *xs, const void *data, size_t len);
/* Hands out the next n bytes, squeezing more when needed; returns 0 or -1. */
int xof_squeeze(xof_stream *xs, uint8_t *out, size_t n);
void xof_free(xof_stream *xs);

/* One-shot SHAKE256 of up to four pieces (NULL pieces are skipped); returns 0 or -1. */
int shake256_pieces(uint8_t *out, size_t outlen, const void *a, size_t alen, const void *b,
                    size_t blen, const void *c, size_t clen, const void *d, size_t dlen);

#endif
