/* PKCS#11's fixed-width text fields (labels, descriptions, manufacturer, model): blank-padded to
 * their width, not NUL-terminated; a longer text is cut. */
#ifndef SVCD_PKCS11_PADDED_H
#define SVCD_PKCS11_PADDED_H

#include <string.h>

#include "pkcs11.h"

static inline void pkcs11_pad(CK_UTF8CHAR *dst, size_t width, const char *src) {
  size_t len = strlen(src);
  memset(dst, ' ', width);
  memcpy(dst, src, len < width ? len : width);
}

#endif
