#include "debug.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int debug_on;

void debug_init(void) {
  const char *v = getenv("SVCD_PKCS11_DEBUG");
  debug_on = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

void debug_log(const char *fmt, ...) {
  if (!debug_on) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("svcd-pkcs11: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
