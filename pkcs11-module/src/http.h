/* HTTP to the proxy through libcurl: a pool of connections per endpoint, one call bounded by the
 * endpoint's timeout (429/503 retries included), and the CKR_* of an answer. */
#ifndef SVCP11_HTTP_H
#define SVCP11_HTTP_H

#include <stddef.h>

#include "config.h"
#include "pkcs11.h"

/* 429/503 answers retried after their Retry-After at most this many times, within the timeout. */
#define SVCP11_MAX_RETRIES 3

typedef struct http_pool http_pool;

typedef struct {
  long status;
  unsigned char *body;
  size_t len;
  long retry_after; /* seconds; -1 when absent */
} http_answer;

/* libcurl's global set-up, once per process; never undone (see http.c). */
CK_RV http_global_init(void);
http_pool *http_pool_new(const endpoint_config *ep);
/* Frees the pool; `abandon` leaves the connections as they are (a forked child must not close the
 * parent's TLS sessions). */
void http_pool_free(http_pool *p, int abandon);
/* One request (429/503 retried after Retry-After, bounded by the endpoint's timeout). Header lines
 * in `headers` are "Name: value". A transport failure is returned as its CKR_*. */
CK_RV http_call(http_pool *p, const char *method, const char *path, const char *const *headers,
                const unsigned char *body, size_t len, http_answer *out);
void http_answer_free(http_answer *a);
/* The CKR_* for an HTTP status on a route ("sign", "verify", "token"). */
CK_RV status_to_rv(long status, const char *route);

#endif
