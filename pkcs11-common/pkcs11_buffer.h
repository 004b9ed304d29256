/* A growing byte buffer with a limit: the parts of a multi-part operation, an HTTP answer. */
#ifndef SVCD_PKCS11_BUFFER_H
#define SVCD_PKCS11_BUFFER_H

#include <stddef.h>

#include "pkcs11.h"

typedef struct {
  unsigned char *data;
  size_t len, cap;
} pkcs11_buffer;

/* Appends `len` bytes: CKR_DATA_LEN_RANGE when the buffer would hold more than `limit` bytes
 * (nothing is appended then), CKR_HOST_MEMORY when it cannot grow. */
CK_RV pkcs11_buffer_append(pkcs11_buffer *b, const void *data, size_t len, size_t limit);
/* Frees the bytes and empties the buffer. */
void pkcs11_buffer_free(pkcs11_buffer *b);

#endif
