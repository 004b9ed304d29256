/* Growing byte buffers, the JSON and hex svcd's audit lines are written in, and the two clocks. */
#ifndef SVCD_LIMIT_TEXT_H
#define SVCD_LIMIT_TEXT_H

#include <stddef.h>

struct buf {
  char *p;
  size_t len, cap;
};

/* Room for `more` bytes after len; dies when out of memory. */
void buf_reserve(struct buf *b, size_t more);
void buf_add(struct buf *b, const void *p, size_t n);
void buf_str(struct buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void buf_fmt(struct buf *b, const char *fmt, ...);
/* `n` bytes as lowercase hex. */
void buf_hex(struct buf *b, const unsigned char *p, size_t n);
/* A JSON string as JSON.stringify writes it (UTF-8 kept as it is, controls escaped). */
void buf_json(struct buf *b, const char *s, size_t n);

/* Whether `p` is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
int valid_utf8(const unsigned char *p, size_t n);

/* UTC ISO 8601 with milliseconds, as Date.toISOString(): 24 chars. */
void iso_time(char out[25]);
/* The HTTP Date header's value, made once per second (per thread). */
void http_date(char out[30]);

#endif
