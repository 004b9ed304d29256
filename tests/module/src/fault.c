/* Test hook: fault injection. A file named `faults` in the token directory makes chosen functions
 * answer a chosen CK_RV at random, so the daemon's handling of module failures can be tested
 * without a broken device. One rule per line, `#` comments:
 *
 *   <function> <rv> <probability> [seed]      e.g.  C_Sign 0x30 0.25 7
 *   <function> delay <milliseconds>            e.g.  C_Sign delay 1000
 *
 * A delay rule makes every call of the function wait that long first (outside the lock, so calls
 * from several threads wait together): a test holds requests in flight without a timer of its own.
 *
 * The draws come from one xorshift64* generator, seeded from the first rule's seed (default 1)
 * whenever the file changes (inode, size or mtime), so a run is reproducible for a given sequence
 * of calls. Without the file nothing is injected and the cost is one stat() per hooked call. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "svcmod.h"

#define FAULT_RULES 16

typedef struct {
  char function[32];
  CK_RV rv;
  double probability;
  /* > 0: a delay rule (rv and probability unused). */
  unsigned delay_ms;
} fault_rule;

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static fault_rule rules[FAULT_RULES];
static unsigned nrules;
static struct stat seen; /* identity of the file the rules were read from */
static uint64_t rng;

static uint64_t next_random(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1DULL;
}

/* A malformed line is reported once (on load) and ignored: a test sees it on the daemon's stderr. */
static void load_rules(const char *path) {
  nrules = 0;
  uint64_t seed = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  char line[256];
  while (fgets(line, sizeof line, f) && nrules < FAULT_RULES) {
    char name[32];
    char rv_text[32];
    double p;
    unsigned long long s = 0;
    if (line[0] == '#' || line[0] == '\n') continue;
    int n = sscanf(line, "%31s %31s %lf %llu", name, rv_text, &p, &s);
    if (n == 3 && strcmp(rv_text, "delay") == 0 && p >= 1.0 && p <= 60000.0) {
      fault_rule *r = &rules[nrules++];
      memset(r, 0, sizeof *r);
      snprintf(r->function, sizeof r->function, "%s", name);
      r->delay_ms = (unsigned)p;
      continue;
    }
    char *end;
    unsigned long rv = strtoul(rv_text, &end, 0);
    if (n < 3 || *end != '\0' || !(p >= 0.0 && p <= 1.0)) {
      fprintf(stderr, "svcmod: faults: ignored line: %s", line);
      continue;
    }
    fault_rule *r = &rules[nrules++];
    snprintf(r->function, sizeof r->function, "%s", name);
    r->rv = rv;
    r->probability = p;
    r->delay_ms = 0;
    if (n == 4 && seed == 0) seed = s;
  }
  fclose(f);
  rng = seed ? seed : 1;
}

CK_RV fault_injected(const char *function) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/faults", g.cfg.tokendir);
  struct stat st;
  if (stat(path, &st) != 0) return CKR_OK;
  pthread_mutex_lock(&fault_lock);
  if (st.st_ino != seen.st_ino || st.st_size != seen.st_size ||
      st.st_mtim.tv_sec != seen.st_mtim.tv_sec || st.st_mtim.tv_nsec != seen.st_mtim.tv_nsec) {
    load_rules(path);
    seen = st;
  }
  CK_RV rv = CKR_OK;
  unsigned delay_ms = 0;
  for (unsigned i = 0; i < nrules && rv == CKR_OK; i++) {
    if (strcmp(rules[i].function, function) != 0) continue;
    if (rules[i].delay_ms > 0) {
      delay_ms += rules[i].delay_ms;
      continue;
    }
    /* 53 random bits → [0, 1): probability 1 always fires, 0 never. */
    double draw = (double)(next_random() >> 11) * 0x1.0p-53;
    if (draw < rules[i].probability) rv = rules[i].rv;
  }
  pthread_mutex_unlock(&fault_lock);
  if (delay_ms > 0) {
    struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) continue; /* EINTR: sleep the rest */
  }
  return rv;
}
