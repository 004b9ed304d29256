/* POST /sign: the checks before the body, the policy, the signature, the sign line. */
#include "sign.h"

#include <openssl/sha.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "audit.h"
#include "http.h"
#include "options.h"
#include "policy.h"

#define FORBIDDEN 403, "Forbidden", "The key is not available to this client.", NULL

uint32_t request_prefix;
static atomic_ulong request_count;

/* The members of the sign line after its time, as svcd's route gives them. */
static void sign_fields(struct buf *tail, const struct request *r, const unsigned char *message_sha,
                        const unsigned char *signature_sha) {
  buf_str(tail, ",\"key\":");
  buf_json(tail, r->label, r->label_len);
  buf_str(tail, ",\"mechanism\":\"CKM_ECDSA\",\"message_sha256\":\"");
  buf_hex(tail, message_sha, 32);
  buf_str(tail, "\",\"signature_sha256\":\"");
  buf_hex(tail, signature_sha, 32);
  buf_fmt(tail, "\",\"request_id\":\"%08x%08lx\"", request_prefix,
          atomic_fetch_add(&request_count, 1) & 0xffffffffUL);
}

/* The checks of a POST /sign head before its body is read: 0 when `fd` was answered already. */
static int sign_allowed(int fd, const struct request *r) {
  if (r->subjects > 1) {
    refuse(fd, 400, "Bad Request", "More than one X-SVC-Client-Subject header.", NULL);
  } else if (r->subjects == 0 || r->subject_len == 0) {
    refuse(fd, 400, "Bad Request", "The X-SVC-Client-Subject header is required.", NULL);
  } else if (r->labels > 1) {
    refuse(fd, 400, "Bad Request", "More than one X-SVC-Key header.", NULL);
  } else if (r->labels == 0 || r->label_len == 0) {
    refuse(fd, 400, "Bad Request", "The X-SVC-Key header names the key and is required.", NULL);
  } else if (r->chunked || r->bad_length) {
    refuse(fd, 400, "Bad Request", "The body needs one valid Content-Length.", NULL);
  } else if (r->content_length < 0) {
    refuse(fd, 411, "Length Required", "The body needs a Content-Length.", NULL);
  } else if (r->content_length > opt.max_body) {
    refuse(fd, 413, "Content Too Large", "The body is larger than this daemon takes.", NULL);
  } else if (!valid_utf8((const unsigned char *)r->subject, r->subject_len)) {
    /* svcd keeps such a subject as actor_bytes; the reference server does not need to */
    refuse(fd, 400, "Bad Request", "The subject is not UTF-8 (not in the reference server).", NULL);
  } else {
    return 1;
  }
  return 0;
}

/* Signs the body; the answer and the line go to `j`. 0 when `fd` was answered already. */
static int sign_request(struct worker *w, int fd, const struct request *r,
                        const unsigned char *body, struct job *j) {
  CK_OBJECT_HANDLE key = key_copy(w, r->label, r->label_len);
  if (!key) {
    refuse(fd, FORBIDDEN);
    return 0;
  }
  if (!audit_healthy()) {
    refuse(fd, 503, "Service Unavailable", "The audit log cannot be written; signing is stopped.",
           "Retry-After: 5\r\n");
    return 0;
  }
  unsigned char digest[32], sig[132], sig_sha[32];
  SHA256(body, (size_t)r->content_length, digest);
  size_t len = token_sign(w->session, CKM_ECDSA, key, digest, 32, sig, sizeof sig);
  if (!len) {
    refuse(fd, 500, "Internal Server Error", "The token did not sign.", NULL);
    return 0;
  }
  ok_answer(&j->answer, sig, len);
  if (opt.audit) {
    SHA256(sig, len, sig_sha);
    buf_str(&j->head, "{\"event\":\"sign\",\"actor\":");
    buf_json(&j->head, r->subject, r->subject_len);
    sign_fields(&j->tail, r, digest, sig_sha);
  }
  return 1;
}

/* One connection: its request, its answer (now, or once its line is durable). */
void serve(struct worker *w, int fd) {
  if (!peer_is_proxy(fd)) {
    close(fd);
    return;
  }
  static const struct timeval deadline = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline);
  char head[HEAD_MAX];
  size_t got, head_len = read_head(fd, head, &got);
  if (!head_len) {
    if (got >= HEAD_MAX) {
      refuse(fd, 431, "Request Header Fields Too Large", "The head is too large.", NULL);
    } else {
      close(fd);
    }
    return;
  }
  char *eol = memmem(head, head_len, "\r\n", 2);
  struct request r = {0};
  if (!parse_headers(eol + 2, head + head_len, &r)) {
    refuse(fd, 400, "Bad Request", "The request head is malformed.", NULL);
    return;
  }
  if ((size_t)(eol - head) < 19 || memcmp(head, "POST /sign HTTP/1.", 18)) {
    refuse(fd, 404, "Not Found", "No such route on this listener.", NULL);
    return;
  }
  if (!sign_allowed(fd, &r)) return;
  struct identity *who = identity_enter(r.subject, r.subject_len);
  if (!who) {
    refuse(fd, 429, "Too Many Requests", "Too many requests of this client in flight.",
           "Retry-After: 1\r\n");
    return;
  }
  if (is_daemon_label(r.label, r.label_len) ||
      !policy_allows(r.subject, r.subject_len, r.label, r.label_len)) {
    refuse(fd, FORBIDDEN);
    identity_leave(who);
    return;
  }
  size_t len = (size_t)r.content_length, have = got - head_len;
  unsigned char *body = malloc(len ? len : 1);
  memcpy(body, head + head_len, have < len ? have : len);
  struct job *j = calloc(1, sizeof *j);
  j->fd = fd;
  j->who = who;
  int read_ok = read_body(fd, body, have, len);
  if (!read_ok) close(fd);
  int signed_ok = read_ok && sign_request(w, fd, &r, body, j);
  free(body);
  if (!signed_ok) {
    identity_leave(who);
    free_job(j);
    return;
  }
  if (opt.audit) {
    audit_submit(j);
    return;
  }
  answer_now(fd, &j->answer);
  identity_leave(who);
  free_job(j);
}
