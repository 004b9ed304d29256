#include "pkcs11_buffer.h"

#include <stdlib.h>
#include <string.h>

CK_RV pkcs11_buffer_append(pkcs11_buffer *b, const void *data, size_t len, size_t limit) {
  if (b->len > limit || len > limit - b->len) return CKR_DATA_LEN_RANGE;
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + len) cap *= 2;
    unsigned char *grown = realloc(b->data, cap);
    if (grown == NULL) return CKR_HOST_MEMORY;
    b->data = grown;
    b->cap = cap;
  }
  if (len > 0) memcpy(b->data + b->len, data, len);
  b->len += len;
  return CKR_OK;
}

void pkcs11_buffer_free(pkcs11_buffer *b) {
  free(b->data);
  *b = (pkcs11_buffer){0};
}
