/* What the unit tests count their failures with: CHECK(cond) reports a false condition with its
 * place and goes on. */
#ifndef SVCP11_TEST_CHECK_H
#define SVCP11_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                        \
    }                                                                    \
  } while (0)

#endif
