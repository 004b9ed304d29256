/* Byte buffers, JSON and time: the text an answer or an audit line is made of. */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "options.h"

void buf_reserve(struct buf *b, size_t more) {
  if (b->len + more <= b->cap) return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) die("out of memory");
  b->cap = cap;
}

void buf_add(struct buf *b, const void *p, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void buf_fmt(struct buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  buf_reserve(b, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static const char HEX[] = "0123456789abcdef";

void buf_hex(struct buf *b, const unsigned char *p, size_t n) {
  buf_reserve(b, 2 * n);
  for (size_t i = 0; i < n; i++) {
    b->p[b->len++] = HEX[p[i] >> 4];
    b->p[b->len++] = HEX[p[i] & 15];
  }
}

/* Whether `p` is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
int valid_utf8(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = p[i], lo = 0x80, hi = 0xbf;
    size_t k;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) k = 1;
    else if (c >= 0xe0 && c <= 0xef) k = 2, lo = c == 0xe0 ? 0xa0 : lo, hi = c == 0xed ? 0x9f : hi;
    else if (c >= 0xf0 && c <= 0xf4) k = 3, lo = c == 0xf0 ? 0x90 : lo, hi = c == 0xf4 ? 0x8f : hi;
    else return 0;
    if (i + k >= n || p[i + 1] < lo || p[i + 1] > hi) return 0;
    for (size_t j = 2; j <= k; j++) {
      if ((p[i + j] & 0xc0) != 0x80) return 0;
    }
    i += k + 1;
  }
  return 1;
}

/* A JSON string as JSON.stringify writes it (UTF-8 kept as it is, controls escaped). */
void buf_json(struct buf *b, const char *s, size_t n) {
  buf_reserve(b, 6 * n + 2);
  b->p[b->len++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                    : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
    if (esc) {
      memcpy(b->p + b->len, esc, 2);
      b->len += 2;
    } else if (c < 0x20) {
      b->len += (size_t)sprintf(b->p + b->len, "\\u%04x", c);
    } else {
      b->p[b->len++] = (char)c;
    }
  }
  b->p[b->len++] = '"';
}

/* UTC ISO 8601 with milliseconds, as Date.toISOString(): 24 chars. */
void iso_time(char out[25]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(out, 21, "%Y-%m-%dT%H:%M:%S.", &tm);
  unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
  out[n] = (char)('0' + ms / 100);
  out[n + 1] = (char)('0' + ms / 10 % 10);
  out[n + 2] = (char)('0' + ms % 10);
  out[n + 3] = 'Z';
  out[n + 4] = 0;
}

/* The HTTP Date header's value, made once per second. */
void http_date(char out[30]) {
  static __thread time_t made;
  static __thread char text[30];
  time_t now = time(NULL);
  if (now != made) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    made = now;
  }
  memcpy(out, text, 30);
}
