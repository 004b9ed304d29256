/* HTTP/1.1 on an accepted connection: reading a request's head and body, writing an answer. */
#ifndef SVCD_LIMIT_HTTP_H
#define SVCD_LIMIT_HTTP_H

#include <stddef.h>

#include "text.h"

/* The longest head read; a longer one gets 431. */
#define HEAD_MAX 16384

/* The parts of a request head /sign reads. */
struct request {
  const char *subject, *label;
  size_t subject_len, label_len;
  int subjects, labels;
  long content_length;
  int bad_length, chunked;
};

/* Whether the peer of `fd` runs as --proxy-uid (SO_PEERCRED). */
int peer_is_proxy(int fd);
/* Reads until the end of the head; the head's length (through its blank line), or 0. */
size_t read_head(int fd, char *buf, size_t *got);
/* Reads the headers of `head` (after the request line); 0 when one is malformed. */
int parse_headers(char *p, char *end, struct request *r);
/* Reads the rest of a body of `len` bytes of which `have` are in `body` already; 0 on failure. */
int read_body(int fd, unsigned char *body, size_t have, size_t len);

/* The 200 answer of /sign with the signature as its body. */
void ok_answer(struct buf *out, const unsigned char *sig, size_t len);
/* Sends `out` whole (as far as the peer takes it) and closes `fd`. */
void answer_now(int fd, struct buf *out);
/* Answers an RFC 9457 problem, as svcd words its refusals, and closes `fd`. */
void refuse(int fd, int status, const char *title, const char *detail, const char *extra);

#endif
