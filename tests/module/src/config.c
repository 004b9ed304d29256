/* The module's configuration file, named by $SVCMOD_CONF (in the spirit of SOFTHSM2_CONF):
 *   tokendir = /path/to/dir      (required, must exist)
 *   secure_heap_kb = 1024        (64..8192; each session reserves 24 KiB of it)
 *   max_sessions = 127           (1..127; the session cap)
 * '#' starts a comment. Unknown keys are errors, so a typo cannot silently change behaviour.
 * $SVCMOD_HIDE_MECHANISMS (a comma-separated list of mechanism numbers, e.g. "0x403c") makes the
 * module behave as one without them, so tests can meet a module that lacks a mechanism. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "svcmod.h"

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

static int parse_uint(const char *v, unsigned lo, unsigned hi, unsigned *out) {
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || end == v || n < lo || n > hi) return -1;
  *out = (unsigned)n;
  return 0;
}

static CK_RV fail(const char *path, int line, const char *what) {
  if (line > 0)
    fprintf(stderr, "svcmod: %s:%d: %s\n", path, line, what);
  else
    fprintf(stderr, "svcmod: %s: %s\n", path, what);
  return CKR_GENERAL_ERROR;
}

static CK_RV apply(svcmod_config *cfg, const char *path, int ln, const char *key, const char *val) {
  if (strcmp(key, "tokendir") == 0) {
    if (strlen(val) == 0 || strlen(val) >= sizeof cfg->tokendir - 32)
      return fail(path, ln, "tokendir must name a directory");
    strcpy(cfg->tokendir, val);
  } else if (strcmp(key, "secure_heap_kb") == 0) {
    if (parse_uint(val, 64, 8192, &cfg->secure_heap_kb) != 0)
      return fail(path, ln, "secure_heap_kb must be a number from 64 to 8192");
  } else if (strcmp(key, "max_sessions") == 0) {
    if (parse_uint(val, 1, SVCMOD_DEFAULT_SESSION_CAP, &cfg->session_cap) != 0)
      return fail(path, ln, "max_sessions must be a number from 1 to 127");
  } else {
    return fail(path, ln, "unknown setting (known: tokendir, secure_heap_kb, max_sessions)");
  }
  return CKR_OK;
}

/* Each item a number (0x… hex or decimal); anything else fails C_Initialize, so a typo cannot leave
 * a mechanism silently visible. */
static CK_RV load_hidden(svcmod_config *cfg) {
  const char *var = "SVCMOD_HIDE_MECHANISMS";
  const char *list = getenv(var);
  if (list == NULL || *list == 0) return CKR_OK;
  const char *bad = "must be mechanism numbers separated by commas, e.g. 0x403c (at most 8)";
  for (const char *p = list;;) {
    char *end;
    errno = 0;
    unsigned long n = strtoul(p, &end, 0);
    if (errno || end == p || *p == '-' || cfg->nhidden == SVCMOD_MAX_HIDDEN) return fail(var, 0, bad);
    cfg->hidden[cfg->nhidden++] = (CK_MECHANISM_TYPE)n;
    if (*end == 0) return CKR_OK;
    if (*end != ',') return fail(var, 0, bad);
    p = end + 1;
  }
}

CK_RV config_load(svcmod_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->secure_heap_kb = 1024;
  cfg->session_cap = SVCMOD_DEFAULT_SESSION_CAP;
  const char *path = getenv("SVCMOD_CONF");
  if (path == NULL || *path == 0)
    return fail("SVCMOD_CONF", 0, "not set; point it at a file with 'tokendir = DIR'");
  FILE *f = fopen(path, "r");
  if (f == NULL) return fail(path, 0, "cannot open the configuration file");
  char line[PATH_MAX + 64];
  int ln = 0;
  CK_RV rv = CKR_OK;
  while (rv == CKR_OK && fgets(line, sizeof line, f) != NULL) {
    ln++;
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = trim(line);
    if (*s == 0) continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
      rv = fail(path, ln, "expected 'key = value'");
      break;
    }
    *eq = 0;
    rv = apply(cfg, path, ln, trim(s), trim(eq + 1));
  }
  fclose(f);
  if (rv != CKR_OK) return rv;
  if (cfg->tokendir[0] == 0) return fail(path, 0, "no 'tokendir = DIR' line");
  struct stat st;
  if (stat(cfg->tokendir, &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(path, 0, "tokendir does not exist or is not a directory");
  return load_hidden(cfg);
}

int config_hides(const svcmod_config *cfg, CK_MECHANISM_TYPE type) {
  for (unsigned i = 0; i < cfg->nhidden; i++)
    if (cfg->hidden[i] == type) return 1;
  return 0;
}
