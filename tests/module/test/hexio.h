/* Hex helpers shared by the test programs. */
#ifndef SVCMOD_HEXIO_H
#define SVCMOD_HEXIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Decodes hex ("-" is empty) into a malloc'd buffer; returns NULL on bad hex. */
static inline uint8_t *hex_decode(const char *hex, size_t *len) {
  size_t n = 0;
  if (hex[0] == '-' && hex[1] == 0) hex = "";
  while (hex[n]) n++;
  if (n % 2) return NULL;
  uint8_t *out = malloc(n / 2 + 1);
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v = 0;
    for (int k = 0; k < 2; k++) {
      char c = hex[2 * i + k];
      unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                          : 99;
      if (d == 99) {
        free(out);
        return NULL;
      }
      v = v * 16 + d;
    }
    out[i] = (uint8_t)v;
  }
  *len = n / 2;
  return out;
}

static inline void hex_print(FILE *f, const uint8_t *b, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    fputc(digits[b[i] >> 4], f);
    fputc(digits[b[i] & 15], f);
  }
}

#endif
