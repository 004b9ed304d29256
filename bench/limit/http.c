/* The HTTP of svcd-limit: request heads and bodies in, answers and RFC 9457 refusals out. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "options.h"

static void send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* An RFC 9457 problem answer, as svcd words its refusals. */
static void problem(struct buf *out, int status, const char *title, const char *detail,
                    const char *extra_header) {
  char date[30], body[512];
  http_date(date);
  int n = snprintf(body, sizeof body,
                   "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%d,\"detail\":\"%s\"}\n",
                   title, status, detail);
  buf_fmt(out,
          "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n%sDate: %s\r\n"
          "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
          status, title, extra_header ? extra_header : "", date, n, body);
}

void answer_now(int fd, struct buf *out) {
  send_all(fd, out->p, out->len);
  close(fd);
}

void refuse(int fd, int status, const char *title, const char *detail, const char *extra) {
  struct buf out = {0};
  problem(&out, status, title, detail, extra);
  answer_now(fd, &out);
  free(out.p);
}

static int header_is(const char *name, size_t n, const char *want) {
  return strlen(want) == n && !strncasecmp(name, want, n);
}

/* Reads the headers of `head` (after the request line); 0 when one is malformed. */
int parse_headers(char *p, char *end, struct request *r) {
  r->content_length = -1;
  while (p < end) {
    char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
    if (!eol) return 0;
    if (eol == p) return 1;
    char *colon = memchr(p, ':', (size_t)(eol - p));
    if (!colon || colon == p || *p == ' ' || *p == '\t') return 0;
    char *v = colon + 1, *ve = eol;
    while (v < ve && (*v == ' ' || *v == '\t')) v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
    size_t n = (size_t)(colon - p), vn = (size_t)(ve - v);
    if (header_is(p, n, "x-svc-client-subject")) {
      r->subjects++;
      r->subject = v;
      r->subject_len = vn;
    } else if (header_is(p, n, "x-svc-key")) {
      r->labels++;
      r->label = v;
      r->label_len = vn;
    } else if (header_is(p, n, "content-length")) {
      char *e;
      long len = vn ? strtol(v, &e, 10) : -1;
      if (!vn || e != ve || len < 0 || (r->content_length >= 0 && r->content_length != len)) {
        r->bad_length = 1;
      }
      r->content_length = len;
    } else if (header_is(p, n, "transfer-encoding")) {
      r->chunked = 1;
    }
    p = eol + 2;
  }
  return 0;
}

void ok_answer(struct buf *out, const unsigned char *sig, size_t len) {
  char date[30];
  http_date(date);
  buf_fmt(out,
          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nX-SVC-Mechanism: "
          "CKM_ECDSA\r\nX-SVC-Key-Type: ec-p256\r\nDate: %s\r\nContent-Length: %zu\r\n"
          "Connection: close\r\n\r\n",
          date, len);
  buf_add(out, sig, len);
}

/* Reads until the end of the head; the head's length (through its blank line), or 0. */
size_t read_head(int fd, char *buf, size_t *got) {
  *got = 0;
  while (*got < HEAD_MAX) {
    ssize_t n = recv(fd, buf + *got, HEAD_MAX - *got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    size_t from = *got > 3 ? *got - 3 : 0;
    *got += (size_t)n;
    char *end = memmem(buf + from, *got - from, "\r\n\r\n", 4);
    if (end) return (size_t)(end + 4 - buf);
  }
  return 0;
}

/* Reads the rest of a body of `len` bytes of which `have` are in `body` already; 0 on failure. */
int read_body(int fd, unsigned char *body, size_t have, size_t len) {
  while (have < len) {
    ssize_t n = recv(fd, body + have, len - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    have += (size_t)n;
  }
  return 1;
}

int peer_is_proxy(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
         (long)cred.uid == opt.proxy_uid;
}
