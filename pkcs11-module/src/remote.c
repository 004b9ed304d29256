#include "remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"

const unsigned char *payload_bytes(const payload *p) { return p->data != NULL ? p->data : p->dg; }

/* "X-SVC-Key: <label>"; 0 when the label cannot be a header value (CR, LF, too long). */
static int key_header(char *out, size_t cap, const char *label) {
  return strpbrk(label, "\r\n") == NULL &&
         (size_t)snprintf(out, cap, "X-SVC-Key: %s", label) < cap;
}

CK_RV remote_sign(http_pool *http, const char *label, const payload *p, unsigned char *sig,
                  size_t sig_len) {
  char key[512], digest[64];
  if (!key_header(key, sizeof key, label)) return CKR_KEY_HANDLE_INVALID;
  const char *headers[3] = {key, NULL, NULL};
  if (p->digest != NULL) {
    snprintf(digest, sizeof digest, "X-SVC-Digest: %s", p->digest);
    headers[1] = digest;
  }
  http_answer a;
  CK_RV rv = http_call(http, "POST", "/sign", headers, payload_bytes(p), p->len, &a);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "sign");
  if (rv == CKR_OK && a.len != sig_len) {
    debug_log("/sign answered %zu bytes, expected %zu", a.len, sig_len);
    rv = CKR_DEVICE_ERROR;
  }
  if (rv == CKR_OK) memcpy(sig, a.body, sig_len);
  http_answer_free(&a);
  return rv;
}

CK_RV remote_verify(http_pool *http, const char *label, const payload *p, const unsigned char *sig,
                    size_t sig_len) {
  char key[512], length[64], digest[64];
  if (!key_header(key, sizeof key, label)) return CKR_KEY_HANDLE_INVALID;
  snprintf(length, sizeof length, "X-SVC-Signature-Length: %zu", sig_len);
  const char *headers[4] = {key, length, NULL, NULL};
  if (p->digest != NULL) {
    snprintf(digest, sizeof digest, "X-SVC-Digest: %s", p->digest);
    headers[2] = digest;
  }
  unsigned char *body = malloc(sig_len + p->len + 1);
  if (body == NULL) return CKR_HOST_MEMORY;
  memcpy(body, sig, sig_len);
  memcpy(body + sig_len, payload_bytes(p), p->len);
  http_answer a;
  CK_RV rv = http_call(http, "POST", "/verify", headers, body, sig_len + p->len, &a);
  free(body);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "verify");
  http_answer_free(&a);
  return rv;
}
