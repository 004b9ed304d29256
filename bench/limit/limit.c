/*
 * svcd-limit: the limit of svcd's POST /sign on this machine, as a reference for bench/limit.ts. A
 * server in C that does per request what `svcd serve` does for POST /sign and nothing more:
 *
 * - accept on a UNIX socket and check the peer's uid (SO_PEERCRED) against --proxy-uid;
 * - parse POST /sign and its headers (X-SVC-Client-Subject once, X-SVC-Key once, Content-Length);
 * - the per-identity cap (--workers minus one requests in flight per subject, then 429);
 * - the policy lookup (the policy file: `subject<TAB>label` per line, `#` comments), the daemon's
 *   own key labels refused whatever it says, one 403 for every refusal;
 * - SHA-256 of the body and C_Sign(CKM_ECDSA) over it with a session copy of the key (C_CopyObject,
 *   CKA_TOKEN false), one session per worker thread;
 * - the audit line of svcd (lib/audit/format.ts: the same members in the same order, the SHA-256
 *   chain, the token's HMAC seal on the last line of each group, a signed checkpoint every
 *   --checkpoint-every lines and at the end), so that `svcd audit verify` passes over its folder;
 * - one write and one fdatasync per group commit, on a thread of its own;
 * - the answer only once its line is durable, then Connection: close.
 *
 * Not here, since the bench sends none of it: the refusal budget, a policy reload, /verify and the
 * other routes (404), keys other than EC P-256, subjects that are not UTF-8 (400; svcd logs their
 * bytes), audit recovery after a failed write (the server then answers 503 until restarted),
 * continuing an earlier chain (--audit-dir must be empty), the acceptor that holds silent
 * connections (a worker waits up to 10 s per read instead).
 *
 * Threads: --threads workers (accept, parse, sign, hand the line over), one writer (chain, seal,
 * write, fdatasync), one that answers (the requests of durable groups). With --no-audit a worker
 * answers at once.
 *
 *   svcd-limit --socket PATH --proxy-uid UID --policy FILE --module LIB --token LABEL
 *              --pin-file FILE (--audit-dir DIR | --no-audit) [--threads 4] [--workers 16]
 *              [--checkpoint-every 1000] [--max-body 1048576]
 *
 * Prints "listening on PATH" to stderr when ready; SIGTERM or SIGINT: stops accepting, answers
 * what is in flight, writes the shutdown line and a final checkpoint, exits 0.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pkcs11_functions.h"

/* ---- options --------------------------------------------------------------------------------- */

static struct {
  const char *socket, *policy, *module, *token, *pin_file, *audit_dir;
  long proxy_uid;
  int threads, workers, checkpoint_every;
  long max_body;
  int audit;
} opt = {.proxy_uid = -1, .threads = 4, .workers = 16, .checkpoint_every = 1000,
         .max_body = 1 << 20, .audit = 1};

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("svcd-limit: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static long number_arg(const char *name, const char *value, long min, long max) {
  char *end;
  errno = 0;
  long n = strtol(value, &end, 10);
  if (errno || *end || end == value || n < min || n > max) {
    die("%s must be a whole number from %ld to %ld", name, min, max);
  }
  return n;
}

static void parse_options(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--no-audit")) {
      opt.audit = 0;
      continue;
    }
    if (i + 1 >= argc) die("%s needs a value", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--socket")) opt.socket = v;
    else if (!strcmp(a, "--policy")) opt.policy = v;
    else if (!strcmp(a, "--module")) opt.module = v;
    else if (!strcmp(a, "--token")) opt.token = v;
    else if (!strcmp(a, "--pin-file")) opt.pin_file = v;
    else if (!strcmp(a, "--audit-dir")) opt.audit_dir = v;
    else if (!strcmp(a, "--proxy-uid")) opt.proxy_uid = number_arg(a, v, 0, 0xfffffffe);
    else if (!strcmp(a, "--threads")) opt.threads = (int)number_arg(a, v, 1, 256);
    else if (!strcmp(a, "--workers")) opt.workers = (int)number_arg(a, v, 2, 4096);
    else if (!strcmp(a, "--checkpoint-every"))
      opt.checkpoint_every = (int)number_arg(a, v, 1, 1 << 30);
    else if (!strcmp(a, "--max-body")) opt.max_body = number_arg(a, v, 1, 1 << 30);
    else die("unknown option %s", a);
  }
  if (!opt.socket || !opt.policy || !opt.module || !opt.token || !opt.pin_file ||
      opt.proxy_uid < 0) {
    die("--socket, --proxy-uid, --policy, --module, --token and --pin-file are required");
  }
  if (opt.audit == !opt.audit_dir) die("give --audit-dir DIR or --no-audit");
}

/* ---- the token ------------------------------------------------------------------------------- */

static CK_FUNCTION_LIST_3_2 *p11;
static CK_SLOT_ID slot;
#define P11(name) ((__typeof__(&name))p11->fn[IDX_##name])
typedef CK_RV (*copy_object_fn)(CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ATTRIBUTE *, CK_ULONG,
                                CK_OBJECT_HANDLE *);

/* The labels svcd keeps for itself (lib/token: DAEMON_KEY_LABELS): never a client's key. */
static const char *const DAEMON_LABELS[] = {"svc-audit", "svc-audit-sign"};
/* DER of the P-256 curve's OID, as CKA_EC_PARAMS holds it. */
static const unsigned char P256_PARAMS[] = {0x06, 0x08, 0x2a, 0x86, 0x48,
                                            0xce, 0x3d, 0x03, 0x01, 0x07};

static void check_rv(const char *what, CK_RV rv) {
  if (rv != CKR_OK) die("%s failed: 0x%lx", what, (unsigned long)rv);
}

static void load_module(void) {
  void *lib = dlopen(opt.module, RTLD_NOW | RTLD_LOCAL);
  if (!lib) die("cannot load %s: %s", opt.module, dlerror());
  CK_RV (*get)(CK_FUNCTION_LIST_3_2 **) =
      (CK_RV(*)(CK_FUNCTION_LIST_3_2 **))dlsym(lib, "C_GetFunctionList");
  if (!get) die("%s has no C_GetFunctionList", opt.module);
  check_rv("C_GetFunctionList", get(&p11));
  CK_C_INITIALIZE_ARGS args = {.flags = CKF_OS_LOCKING_OK};
  check_rv("C_Initialize", P11(C_Initialize)(&args));
}

/* The slot whose token has --token as its label (blank padded to 32). */
static void find_slot(void) {
  CK_SLOT_ID slots[64];
  CK_ULONG n = 64;
  check_rv("C_GetSlotList", P11(C_GetSlotList)(CK_TRUE, slots, &n));
  char want[32];
  size_t len = strlen(opt.token);
  if (len > sizeof want) die("--token is longer than 32 bytes");
  memset(want, ' ', sizeof want);
  memcpy(want, opt.token, len);
  for (CK_ULONG i = 0; i < n; i++) {
    CK_TOKEN_INFO info;
    if (P11(C_GetTokenInfo)(slots[i], &info) == CKR_OK && !memcmp(info.label, want, sizeof want)) {
      slot = slots[i];
      return;
    }
  }
  die("no token labelled %s", opt.token);
}

static CK_SESSION_HANDLE open_session(void) {
  CK_SESSION_HANDLE s;
  check_rv("C_OpenSession",
           P11(C_OpenSession)(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
  return s;
}

/* One C_Login with the PIN file's bytes (one trailing newline removed), zeroed when it returns. */
static void login(CK_SESSION_HANDLE s) {
  unsigned char pin[256];
  int fd = open(opt.pin_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open the PIN file %s", opt.pin_file);
  ssize_t n = read(fd, pin, sizeof pin);
  close(fd);
  if (n <= 0 || n == (ssize_t)sizeof pin) die("the PIN file %s is empty or too long", opt.pin_file);
  if (pin[n - 1] == '\n') pin[--n] = 0;
  CK_RV rv = P11(C_Login)(s, CKU_USER, pin, (CK_ULONG)n);
  explicit_bzero(pin, sizeof pin);
  if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) {
    die("C_Login failed: 0x%lx", (unsigned long)rv);
  }
}

/* The token object of class `cls` labelled `label`, or CK_INVALID_HANDLE. */
static CK_OBJECT_HANDLE find_object(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label) {
  CK_BBOOL yes = CK_TRUE;
  CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls},
                      {CKA_TOKEN, &yes, sizeof yes},
                      {CKA_LABEL, (void *)label, strlen(label)}};
  CK_OBJECT_HANDLE h[2];
  CK_ULONG n = 0;
  if (P11(C_FindObjectsInit)(s, t, 3) != CKR_OK) return CK_INVALID_HANDLE;
  CK_RV rv = P11(C_FindObjects)(s, h, 2, &n);
  P11(C_FindObjectsFinal)(s);
  return rv == CKR_OK && n == 1 ? h[0] : CK_INVALID_HANDLE;
}

/* C_SignInit + C_Sign; the signature's length, or 0. */
static size_t token_sign(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE mech, CK_OBJECT_HANDLE key,
                         const unsigned char *data, size_t len, unsigned char *out, size_t cap) {
  CK_MECHANISM m = {mech, NULL, 0};
  if (P11(C_SignInit)(s, &m, key) != CKR_OK) return 0;
  CK_ULONG n = cap;
  if (P11(C_Sign)(s, (CK_BYTE *)data, len, out, &n) != CKR_OK) return 0;
  return n;
}

/* ---- policy ---------------------------------------------------------------------------------- */

/* Grants as "subject\tlabel" strings in an open-addressing table; read once at start. */
static char **grants;
static size_t grant_slots;

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return h;
}

static void grant_add(const char *line, size_t len) {
  size_t i = hash_bytes(line, len) & (grant_slots - 1);
  for (; grants[i]; i = (i + 1) & (grant_slots - 1)) {
    if (strlen(grants[i]) == len && !memcmp(grants[i], line, len)) return;
  }
  grants[i] = strndup(line, len);
}

static void load_policy(void) {
  FILE *f = fopen(opt.policy, "r");
  if (!f) die("cannot read the policy %s", opt.policy);
  size_t lines = 0, cap = 0;
  char *line = NULL;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) >= 0) lines++;
  grant_slots = 16;
  while (grant_slots < 2 * lines + 2) grant_slots <<= 1;
  grants = calloc(grant_slots, sizeof *grants);
  rewind(f);
  while ((n = getline(&line, &cap, f)) >= 0) {
    if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
    if (n == 0 || line[0] == '#') continue;
    char *tab = memchr(line, '\t', n);
    if (!tab || tab == line || tab == line + n - 1 || memchr(tab + 1, '\t', line + n - tab - 1)) {
      die("policy line is not subject<TAB>label: %s", line);
    }
    grant_add(line, n);
  }
  free(line);
  fclose(f);
}

static int policy_allows(const char *subject, size_t slen, const char *label, size_t llen) {
  char key[8192 + 256 + 2];
  if (slen + llen + 1 >= sizeof key) return 0;
  memcpy(key, subject, slen);
  key[slen] = '\t';
  memcpy(key + slen + 1, label, llen);
  size_t len = slen + 1 + llen;
  size_t mask = grant_slots - 1;
  for (size_t i = hash_bytes(key, len) & mask; grants[i]; i = (i + 1) & mask) {
    if (strlen(grants[i]) == len && !memcmp(grants[i], key, len)) return 1;
  }
  return 0;
}

/* ---- the per-identity cap -------------------------------------------------------------------- */

struct identity {
  struct identity *next;
  int in_flight;
  size_t len;
  char subject[];
};

#define IDENTITY_BUCKETS 4096
static struct identity *identities[IDENTITY_BUCKETS];
static pthread_mutex_t identity_lock = PTHREAD_MUTEX_INITIALIZER;

/* Counts one more request of `subject`; NULL when it already has --workers - 1 in flight. */
static struct identity *identity_enter(const char *subject, size_t len) {
  size_t b = hash_bytes(subject, len) & (IDENTITY_BUCKETS - 1);
  pthread_mutex_lock(&identity_lock);
  struct identity *e = identities[b];
  while (e && (e->len != len || memcmp(e->subject, subject, len))) e = e->next;
  if (!e) {
    e = malloc(sizeof *e + len);
    e->in_flight = 0;
    e->len = len;
    memcpy(e->subject, subject, len);
    e->next = identities[b];
    identities[b] = e;
  }
  if (e->in_flight >= opt.workers - 1) e = NULL;
  else e->in_flight++;
  pthread_mutex_unlock(&identity_lock);
  return e;
}

/* One request of `e` is answered; the entry goes when none is left in flight. */
static void identity_leave(struct identity *e) {
  size_t b = hash_bytes(e->subject, e->len) & (IDENTITY_BUCKETS - 1);
  pthread_mutex_lock(&identity_lock);
  if (--e->in_flight == 0) {
    struct identity **at = &identities[b];
    while (*at != e) at = &(*at)->next;
    *at = e->next;
    free(e);
  }
  pthread_mutex_unlock(&identity_lock);
}

/* ---- JSON and time --------------------------------------------------------------------------- */

struct buf {
  char *p;
  size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more) {
  if (b->len + more <= b->cap) return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) die("out of memory");
  b->cap = cap;
}

static void buf_add(struct buf *b, const void *p, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_fmt(struct buf *b, const char *fmt, ...) {
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

static void buf_hex(struct buf *b, const unsigned char *p, size_t n) {
  buf_reserve(b, 2 * n);
  for (size_t i = 0; i < n; i++) {
    b->p[b->len++] = HEX[p[i] >> 4];
    b->p[b->len++] = HEX[p[i] & 15];
  }
}

/* Whether `p` is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int valid_utf8(const unsigned char *p, size_t n) {
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
static void buf_json(struct buf *b, const char *s, size_t n) {
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
static void iso_time(char out[25]) {
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
static void http_date(char out[30]) {
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

/* ---- the audit log --------------------------------------------------------------------------- */

/* A request whose answer waits for its line. */
struct job {
  struct job *next;
  int fd;
  struct identity *who;
  /* `{"event":"sign","actor":…` and `,"key":…,"request_id":…`: the line around seq and time. */
  struct buf head, tail;
  /* The whole answer, sent once the line is durable. */
  struct buf answer;
  int failed;
};

/* SHA-256, fetched once (an implicit fetch per digest costs a lookup each time). */
static EVP_MD *sha256_md;

/* Jobs handed to one thread: pushed by one or many threads, taken all at once. */
struct queue {
  pthread_mutex_t lock;
  pthread_cond_t more;
  struct job *jobs; /* newest first */
  int closing;
};
#define QUEUE_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER}

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
static struct queue answers = QUEUE_INIT;

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
static void open_audit(CK_SESSION_HANDLE s) {
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

/* Pushes a list of jobs (oldest first, linked by `next`) under one lock, with one wake-up. */
static void queue_push(struct queue *q, struct job *oldest_first) {
  pthread_mutex_lock(&q->lock);
  for (struct job *j = oldest_first, *next; j; j = next) {
    next = j->next;
    j->next = q->jobs;
    q->jobs = j;
  }
  pthread_cond_signal(&q->more);
  pthread_mutex_unlock(&q->lock);
}

/* Waits for jobs; all of them, oldest first, or NULL once the queue is closed and empty. */
static struct job *queue_take(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  while (!q->jobs && !q->closing) pthread_cond_wait(&q->more, &q->lock);
  struct job *newest = q->jobs, *oldest_first = NULL;
  q->jobs = NULL;
  pthread_mutex_unlock(&q->lock);
  while (newest) {
    struct job *next = newest->next;
    newest->next = oldest_first;
    oldest_first = newest;
    newest = next;
  }
  return oldest_first;
}

static void queue_close(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  q->closing = 1;
  pthread_cond_signal(&q->more);
  pthread_mutex_unlock(&q->lock);
}

/* The writer thread: every line queued since the last group is the next group. */
static void *writer_main(void *arg) {
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

/* ---- HTTP ------------------------------------------------------------------------------------ */

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

static void answer_now(int fd, struct buf *out) {
  send_all(fd, out->p, out->len);
  close(fd);
}

static void refuse(int fd, int status, const char *title, const char *detail, const char *extra) {
  struct buf out = {0};
  problem(&out, status, title, detail, extra);
  answer_now(fd, &out);
  free(out.p);
}

#define FORBIDDEN 403, "Forbidden", "The key is not available to this client.", NULL

/* The parts of a request head /sign reads. */
struct request {
  const char *subject, *label;
  size_t subject_len, label_len;
  int subjects, labels;
  long content_length;
  int bad_length, chunked;
};

static int header_is(const char *name, size_t n, const char *want) {
  return strlen(want) == n && !strncasecmp(name, want, n);
}

/* Reads the headers of `head` (after the request line); 0 when one is malformed. */
static int parse_headers(char *p, char *end, struct request *r) {
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

/* A worker thread's session and its session copies of the keys it has used. */
struct worker {
  CK_SESSION_HANDLE session;
  struct {
    char label[256];
    CK_OBJECT_HANDLE copy;
  } keys[16];
  int nkeys;
};

/* The session copy of the EC P-256 key `label` (CKA_TOKEN false), made at its first use. */
static CK_OBJECT_HANDLE key_copy(struct worker *w, const char *label, size_t len) {
  for (int i = 0; i < w->nkeys; i++) {
    if (strlen(w->keys[i].label) == len && !memcmp(w->keys[i].label, label, len)) {
      return w->keys[i].copy;
    }
  }
  if (len >= sizeof w->keys[0].label || w->nkeys == 16) return CK_INVALID_HANDLE;
  char name[256];
  memcpy(name, label, len);
  name[len] = 0;
  CK_OBJECT_HANDLE key = find_object(w->session, CKO_PRIVATE_KEY, name);
  if (!key) return CK_INVALID_HANDLE;
  CK_KEY_TYPE type = 0;
  unsigned char params[64];
  CK_ATTRIBUTE a[] = {{CKA_KEY_TYPE, &type, sizeof type}, {CKA_EC_PARAMS, params, sizeof params}};
  if (P11(C_GetAttributeValue)(w->session, key, a, 2) != CKR_OK || type != CKK_EC ||
      a[1].ulValueLen != sizeof P256_PARAMS || memcmp(params, P256_PARAMS, sizeof P256_PARAMS)) {
    return CK_INVALID_HANDLE;
  }
  CK_BBOOL no = CK_FALSE;
  CK_ATTRIBUTE t[] = {{CKA_TOKEN, &no, sizeof no}};
  CK_OBJECT_HANDLE copy;
  if (((copy_object_fn)p11->fn[IDX_C_CopyObject])(w->session, key, t, 1, &copy) != CKR_OK) {
    return CK_INVALID_HANDLE;
  }
  memcpy(w->keys[w->nkeys].label, name, len + 1);
  w->keys[w->nkeys++].copy = copy;
  return copy;
}

static uint32_t request_prefix;
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

static void ok_answer(struct buf *out, const unsigned char *sig, size_t len) {
  char date[30];
  http_date(date);
  buf_fmt(out,
          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nX-SVC-Mechanism: "
          "CKM_ECDSA\r\nX-SVC-Key-Type: ec-p256\r\nDate: %s\r\nContent-Length: %zu\r\n"
          "Connection: close\r\n\r\n",
          date, len);
  buf_add(out, sig, len);
}

#define HEAD_MAX 16384

/* Reads until the end of the head; the head's length (through its blank line), or 0. */
static size_t read_head(int fd, char *buf, size_t *got) {
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
static int read_body(int fd, unsigned char *body, size_t have, size_t len) {
  while (have < len) {
    ssize_t n = recv(fd, body + have, len - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    have += (size_t)n;
  }
  return 1;
}

static int peer_is_proxy(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
         (long)cred.uid == opt.proxy_uid;
}

static int is_daemon_label(const char *label, size_t len) {
  for (size_t i = 0; i < sizeof DAEMON_LABELS / sizeof *DAEMON_LABELS; i++) {
    if (strlen(DAEMON_LABELS[i]) == len && !memcmp(DAEMON_LABELS[i], label, len)) return 1;
  }
  return 0;
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
  if (!atomic_load(&audit.healthy)) {
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

static void free_job(struct job *j) {
  free(j->head.p);
  free(j->tail.p);
  free(j->answer.p);
  free(j);
}

/* One connection: its request, its answer (now, or once its line is durable). */
static void serve(struct worker *w, int fd) {
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
    j->next = NULL;
    queue_push(&audit.pending, j);
    return;
  }
  answer_now(fd, &j->answer);
  identity_leave(who);
  free_job(j);
}

static int listen_fd;
static atomic_int stopping;

static void *worker_main(void *arg) {
  struct worker *w = arg;
  pthread_setname_np(pthread_self(), "limit-worker");
  w->session = open_session();
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (atomic_load(&stopping)) break;
      continue;
    }
    serve(w, fd);
  }
  P11(C_CloseSession)(w->session);
  return NULL;
}

/* The answering thread: answers of durable groups (or 503 when their group failed), then close. */
static void *answering_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "limit-answer");
  for (struct job *group; (group = queue_take(&answers));) {
    while (group) {
      struct job *next = group->next;
      if (group->failed) {
        refuse(group->fd, 503, "Service Unavailable",
               "The audit log cannot be written; no signature was released.", "Retry-After: 5\r\n");
      } else {
        answer_now(group->fd, &group->answer);
      }
      identity_leave(group->who);
      free_job(group);
      group = next;
    }
  }
  return NULL;
}

static void listen_on_socket(void) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(opt.socket) >= sizeof a.sun_path) die("--socket path is too long");
  strcpy(a.sun_path, opt.socket);
  unlink(opt.socket);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0) {
    die("cannot bind %s: %s", opt.socket, strerror(errno));
  }
  chmod(opt.socket, 0660);
  if (listen(listen_fd, 256) != 0) die("cannot listen on %s", opt.socket);
}

int main(int argc, char **argv) {
  parse_options(argc, argv);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
  if (!sha256_md) die("OpenSSL has no SHA-256");
  load_module();
  find_slot();
  CK_SESSION_HANDLE first = open_session();
  login(first);
  load_policy();
  unsigned char random[4];
  if (P11(C_GenerateRandom)(first, random, 4) != CKR_OK) die("C_GenerateRandom failed");
  request_prefix = (uint32_t)random[0] << 24 | random[1] << 16 | random[2] << 8 | random[3];
  listen_on_socket();
  if (opt.audit) open_audit(first);
  pthread_t writer, answering, *workers = calloc((size_t)opt.threads, sizeof *workers);
  struct worker *state = calloc((size_t)opt.threads, sizeof *state);
  if (opt.audit) {
    pthread_create(&writer, NULL, writer_main, NULL);
    pthread_create(&answering, NULL, answering_main, NULL);
  }
  for (int i = 0; i < opt.threads; i++) pthread_create(&workers[i], NULL, worker_main, &state[i]);
  fprintf(stderr, "svcd-limit: listening on %s (%d threads, audit %s)\n", opt.socket,
          opt.threads, opt.audit ? "on" : "off");
  int sig;
  sigwait(&stop, &sig);
  atomic_store(&stopping, 1);
  shutdown(listen_fd, SHUT_RDWR);
  for (int i = 0; i < opt.threads; i++) pthread_join(workers[i], NULL);
  if (opt.audit) {
    queue_close(&audit.pending);
    pthread_join(writer, NULL);
    queue_close(&answers);
    pthread_join(answering, NULL);
  }
  close(listen_fd);
  unlink(opt.socket);
  P11(C_Finalize)(NULL);
  fprintf(stderr, "svcd-limit: stopped\n");
  return 0;
}
