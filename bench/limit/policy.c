/* The policy, the daemon's own key labels, and the per-identity cap on requests in flight. */
#include "policy.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

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

void load_policy(void) {
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

int policy_allows(const char *subject, size_t slen, const char *label, size_t llen) {
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

/* The labels svcd keeps for itself (lib/token: DAEMON_KEY_LABELS): never a client's key. */
static const char *const DAEMON_LABELS[] = {"svc-audit", "svc-audit-sign"};

int is_daemon_label(const char *label, size_t len) {
  for (size_t i = 0; i < sizeof DAEMON_LABELS / sizeof *DAEMON_LABELS; i++) {
    if (strlen(DAEMON_LABELS[i]) == len && !memcmp(DAEMON_LABELS[i], label, len)) return 1;
  }
  return 0;
}

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
struct identity *identity_enter(const char *subject, size_t len) {
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
void identity_leave(struct identity *e) {
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
