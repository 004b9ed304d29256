/* A signature or a verification by the daemon: POST /sign and POST /verify with the message
 * (message mode) or a digest made here (digest mode: X-SVC-Digest). */
#ifndef SVCP11_REMOTE_H
#define SVCP11_REMOTE_H

#include <stddef.h>

#include "http.h"
#include "pkcs11.h"

/* What goes to the daemon (or to the local verifier): a digest and its name, or the message. */
typedef struct {
  const char *digest; /* NULL: message mode */
  int md_nid;
  unsigned char dg[64];
  const unsigned char *data; /* the message; NULL: the digest in dg */
  size_t len;
} payload;

const unsigned char *payload_bytes(const payload *p);
/* POST /sign as key `label`; the answer must be `sig_len` bytes. */
CK_RV remote_sign(http_pool *http, const char *label, const payload *p, unsigned char *sig,
                  size_t sig_len);
/* POST /verify as key `label`: CKR_OK or CKR_SIGNATURE_INVALID (422), or why it failed. */
CK_RV remote_verify(http_pool *http, const char *label, const payload *p, const unsigned char *sig,
                    size_t sig_len);

#endif
