/* The audit log writer: line format, hash chain, seal, checkpoints, group commit. */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "options.h"

/* SHA-256, fetched once (an implicit fetch per digest costs a lookup each time). */
static EVP_MD *sha256_md;

static struct {
  struct queue pending; /* requests whose line is to be written */
  atomic_int healthy;
  int fd;
  char file[32];
  CK_SESSION_HANDLE session;
  CK_OBJECT_HANDLE mac_key, sign_key;
  /* The chain head (the last line chained) and the durable point. */
  long seq, durable_seq;
  unsigned char head_hash[32], durable_hash[32];
  size_t durable_size;
  EVP_MD_CTX *file_hash; /* SHA-256 of the file's durable bytes */
  long since_checkpoint;
  struct buf group;
  /* For the bench's report: groups written, their lines, and the wall time fdatasync took. */
  long groups, lines;
  double sync_seconds;
} audit = {.pending = QUEUE_INIT, .healthy = 1};

/* Requests whose line is durable (or whose group failed), for the thread that answers them. */
struct queue answers = QUEUE_INIT;

void fetch_sha256(void) {
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
  if (!sha256_md) die("OpenSSL has no SHA-256");
}

int audit_healthy(void) { return atomic_load(&audit.healthy); }

void audit_submit(struct job *j) {
  j->next = NULL;
  queue_push(&audit.pending, j);
}

void audit_close(void) { queue_close(&audit.pending); }

/* Appends `head,"seq":N,"time":T tail,"prev":P,"hash":H}\n` to the group; H becomes the head. */
static void chain_line(const struct buf *head, const struct buf *tail) {
  struct buf *g = &audit.group;
  char when[25];
  iso_time(when);
  size_t start = g->len;
  buf_add(g, head->p, head->len);
  buf_fmt(g, ",\"seq\":%ld,\"time\":\"%s\"", audit.seq + 1, when);
  buf_add(g, tail->p, tail->len);
  buf_str(g, ",\"prev\":\"");
  buf_hex(g, audit.head_hash, 32);
  buf_str(g, "\"}");
  /* hash = SHA-256(prev as 32 bytes ‖ the body through its closing brace) */
  static EVP_MD_CTX *h;
  if (!h) h = EVP_MD_CTX_new();
  EVP_DigestInit_ex(h, sha256_md, NULL);
  EVP_DigestUpdate(h, audit.head_hash, 32);
  EVP_DigestUpdate(h, g->p + start, g->len - start);
  unsigned int n = 32;
  EVP_DigestFinal_ex(h, audit.head_hash, &n);
  g->len--; /* the brace: the hash member goes before it */
  buf_str(g, ",\"hash\":\"");
  buf_hex(g, audit.head_hash, 32);
  buf_str(g, "\"}\n");
  audit.seq++;
}

/* The token's seal over the group's last line, put before its `}\n`; 0 when the token fails. */
static int seal_group(void) {
  static const char label[] = "svcd-audit-seal-v2 ";
  unsigned char input[sizeof label - 1 + 32], seal[64];
  memcpy(input, label, sizeof label - 1);
  memcpy(input + sizeof label - 1, audit.head_hash, 32);
  if (token_sign(audit.session, CKM_SHA256_HMAC, audit.mac_key, input, sizeof input, seal,
                 sizeof seal) != 32) {
    return 0;
  }
  struct buf *g = &audit.group;
  g->len -= 2;
  buf_str(g, ",\"seal\":\"");
  buf_hex(g, seal, 32);
  buf_str(g, "\"}\n");
  return 1;
}

/* One write and one fdatasync of the group; 0 on failure. */
static int write_group(void) {
  struct buf *g = &audit.group;
  for (size_t off = 0; off < g->len;) {
    ssize_t n = write(audit.fd, g->p + off, g->len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    off += (size_t)n;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (fdatasync(audit.fd) != 0) return 0;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  audit.sync_seconds += (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  audit.groups++;
  EVP_DigestUpdate(audit.file_hash, g->p, g->len);
  audit.durable_size += g->len;
  audit.durable_seq = audit.seq;
  memcpy(audit.durable_hash, audit.head_hash, 32);
  return 1;
}

/* Seals, writes and syncs the chained group; on failure rolls the chain back and stops signing. */
static int commit_group(long lines) {
  int ok = seal_group() && write_group();
  if (!ok) {
    audit.seq = audit.durable_seq;
    memcpy(audit.head_hash, audit.durable_hash, 32);
    atomic_store(&audit.healthy, 0);
    fprintf(stderr, "svcd-limit: the audit group could not be written: signing stopped\n");
  } else {
    audit.since_checkpoint += lines;
    audit.lines += lines;
  }
  audit.group.len = 0;
  return ok;
}

/* A line of the log's own (actor svcd) with `fields` after its time, made durable at once. */
static void own_line(const char *event, const char *fields) {
  struct buf head = {0}, tail = {0};
  buf_fmt(&head, "{\"event\":\"%s\",\"actor\":\"svcd\"", event);
  buf_str(&tail, fields);
  chain_line(&head, &tail);
  if (!commit_group(0)) die("the audit line %s could not be written", event);
  free(head.p);
  free(tail.p);
}

static void base64(struct buf *b, const unsigned char *p, size_t n) {
  buf_reserve(b, 4 * ((n + 2) / 3) + 1);
  b->len += (size_t)EVP_EncodeBlock((unsigned char *)b->p + b->len, p, (int)n);
}

/* A checkpoint over the durable head: the token's Ed25519 signature of svcd's claim, chained. */
static void chain_checkpoint(void) {
  unsigned char sha[32], sig[128];
  unsigned int n = 32;
  EVP_MD_CTX *copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, audit.file_hash);
  EVP_DigestFinal_ex(copy, sha, &n);
  EVP_MD_CTX_free(copy);
  struct buf msg = {0}, tail = {0}, head = {0};
  buf_fmt(&msg, "svcd-audit-checkpoint-v2 file=%s seq=%ld hash=", audit.file, audit.durable_seq);
  buf_hex(&msg, audit.durable_hash, 32);
  buf_fmt(&msg, " size=%zu sha256=", audit.durable_size);
  buf_hex(&msg, sha, 32);
  size_t len = token_sign(audit.session, CKM_EDDSA, audit.sign_key, (unsigned char *)msg.p,
                          msg.len, sig, sizeof sig);
  if (len != 64) {
    fprintf(stderr, "svcd-limit: the checkpoint could not be signed\n");
  } else {
    buf_fmt(&tail, ",\"file\":\"%s\",\"through_seq\":%ld,\"through_hash\":\"", audit.file,
            audit.durable_seq);
    buf_hex(&tail, audit.durable_hash, 32);
    buf_fmt(&tail, "\",\"through_size\":%zu,\"sha256\":\"", audit.durable_size);
    buf_hex(&tail, sha, 32);
    buf_str(&tail, "\",\"signature\":\"");
    base64(&tail, sig, 64);
    buf_str(&tail, "\"");
    buf_str(&head, "{\"event\":\"checkpoint\",\"actor\":\"svcd\"");
    chain_line(&head, &tail);
  }
  audit.since_checkpoint = 0;
  free(msg.p);
  free(tail.p);
  free(head.p);
}

/* Creates audit.log.000001 in --audit-dir (which must hold none), syncs the folder, opens the
 * chain. */
void open_audit(CK_SESSION_HANDLE s) {
  audit.session = s;
  audit.mac_key = find_object(s, CKO_SECRET_KEY, "svc-audit");
  audit.sign_key = find_object(s, CKO_PRIVATE_KEY, "svc-audit-sign");
  if (!audit.mac_key || !audit.sign_key) die("the token has no svc-audit or svc-audit-sign key");
  snprintf(audit.file, sizeof audit.file, "audit.log.000001");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", opt.audit_dir, audit.file);
  audit.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
  if (audit.fd < 0) die("cannot create %s (the folder must hold no audit file)", path);
  int dir = open(opt.audit_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || fsync(dir) != 0) die("cannot sync %s", opt.audit_dir);
  close(dir);
  audit.file_hash = EVP_MD_CTX_new();
  EVP_DigestInit_ex(audit.file_hash, sha256_md, NULL);
  struct buf fields = {0};
  buf_fmt(&fields, ",\"file\":\"%s\",\"prev_file\":null,\"prev_size\":null,\"prev_torn\":null,"
                   "\"token\":",
          audit.file);
  buf_json(&fields, opt.token, strlen(opt.token));
  buf_str(&fields, ",\"module\":");
  buf_json(&fields, opt.module, strlen(opt.module));
  buf_add(&fields, "", 1);
  own_line("login_ok", fields.p);
  fields.len = 0;
  buf_str(&fields, ",\"listener\":\"authenticated\",\"socket\":");
  buf_json(&fields, opt.socket, strlen(opt.socket));
  buf_add(&fields, "", 1);
  own_line("listener_start", fields.p);
  free(fields.p);
}

/* The writer thread: every line queued since the last group is the next group. */
void *writer_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "limit-writer");
  for (struct job *group; (group = queue_take(&audit.pending));) {
    /* After a failed group nothing more is written: the file may end in a part of it. */
    int ok = atomic_load(&audit.healthy);
    if (ok) {
      long lines = 0;
      if (audit.since_checkpoint >= opt.checkpoint_every) chain_checkpoint();
      for (struct job *j = group; j; j = j->next, lines++) chain_line(&j->head, &j->tail);
      ok = commit_group(lines);
    }
    for (struct job *j = group; j && !ok; j = j->next) j->failed = 1;
    queue_push(&answers, group);
  }
  if (atomic_load(&audit.healthy)) {
    own_line("shutdown", "");
    chain_checkpoint();
    if (!commit_group(0)) fprintf(stderr, "svcd-limit: the final checkpoint was not written\n");
  }
  close(audit.fd);
  fprintf(stderr, "svcd-limit: audit: %ld request lines in %ld groups, fdatasync %.0f µs each\n",
          audit.lines, audit.groups, audit.groups ? audit.sync_seconds * 1e6 / audit.groups : 0.0);
  return NULL;
}
