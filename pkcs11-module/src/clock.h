/* The monotonic clock in milliseconds, and waiting on it (timeouts, Retry-After, /token's age). */
#ifndef SVCP11_CLOCK_H
#define SVCP11_CLOCK_H

#include <time.h>

static inline long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#endif
