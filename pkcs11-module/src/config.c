#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
}

static void endpoint_defaults(endpoint_config *ep) {
  memset(ep, 0, sizeof *ep);
  ep->timeout_ms = SVCP11_DEFAULT_TIMEOUT_MS;
  ep->max_body = SVCP11_DEFAULT_MAX_BODY;
}

/* "host:port" or "https://host:port[/]" → "https://host:port". */
static int set_url(endpoint_config *ep, const char *value) {
  const char *scheme = strstr(value, "://") ? "" : "https://";
  int n = snprintf(ep->url, sizeof ep->url, "%s%s", scheme, value);
  if (n <= 0 || (size_t)n >= sizeof ep->url) return -1;
  while (n > 0 && ep->url[n - 1] == '/') ep->url[--n] = '\0';
  return strncmp(ep->url, "https://", 8) == 0 || strncmp(ep->url, "http://", 7) == 0 ? 0 : -1;
}

static int set_path(char *dst, size_t cap, const char *value) {
  size_t n = strlen(value);
  if (n >= cap) return -1;
  memcpy(dst, value, n + 1);
  return 0;
}

static int set_number(long *dst, const char *value, long min, long max) {
  char *end;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < min || v > max) return -1;
  *dst = v;
  return 0;
}

static char *trim(char *s);

/* "ec-p256, rsa-3072": the key types a slot shows (for tools that give up at a type they do not
 * know, e.g. libp11 before 0.4.13 at Ed25519 and ML-DSA). */
static int set_key_types(endpoint_config *ep, const char *value) {
  char copy[256];
  if (strlen(value) >= sizeof copy) return -1;
  strcpy(copy, value);
  ep->key_types = 0;
  char *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    key_type kt = key_type_from_name(trim(t));
    if (kt == KT_UNKNOWN) return -1;
    ep->key_types |= 1u << kt;
  }
  return ep->key_types != 0 ? 0 : -1;
}

/* One `name = value` line of a section. */
static int set_field(endpoint_config *ep, const char *name, const char *value) {
  long n;
  if (strcmp(name, "url") == 0) return set_url(ep, value);
  if (strcmp(name, "cacert") == 0) return set_path(ep->cacert, sizeof ep->cacert, value);
  if (strcmp(name, "cert") == 0) return set_path(ep->cert, sizeof ep->cert, value);
  if (strcmp(name, "key") == 0) return set_path(ep->key, sizeof ep->key, value);
  if (strcmp(name, "label") == 0) return set_path(ep->label, sizeof ep->label, value);
  if (strcmp(name, "key_types") == 0) return set_key_types(ep, value);
  if (strcmp(name, "timeout") == 0) {
    if (set_number(&n, value, 1, 3600) != 0) return -1;
    ep->timeout_ms = n * 1000;
    return 0;
  }
  if (strcmp(name, "timeout_ms") == 0) {
    if (set_number(&n, value, 100, 3600000) != 0) return -1;
    ep->timeout_ms = n;
    return 0;
  }
  if (strcmp(name, "max_body") == 0) {
    if (set_number(&n, value, 1, 1L << 30) != 0) return -1;
    ep->max_body = (unsigned long)n;
    ep->max_body_set = 1;
    return 0;
  }
  return -2;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
  return s;
}

static CK_RV check_endpoints(client_config *cfg, char *why, size_t n) {
  if (cfg->count == 0) {
    say(why, n, "no [endpoint] section");
    return CKR_GENERAL_ERROR;
  }
  for (unsigned i = 0; i < cfg->count; i++) {
    if (cfg->ep[i].url[0] == '\0') {
      say(why, n, "endpoint %u has no url", i + 1);
      return CKR_GENERAL_ERROR;
    }
  }
  return CKR_OK;
}

CK_RV config_parse(const char *text, client_config *cfg, char *why, size_t why_len) {
  memset(cfg, 0, sizeof *cfg);
  char *copy = strdup(text);
  if (copy == NULL) return CKR_HOST_MEMORY;
  CK_RV rv = CKR_OK;
  unsigned lineno = 0;
  char *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char *s = trim(line);
    if (*s == '\0') continue;
    if (strcmp(s, "[endpoint]") == 0) {
      if (cfg->count == SVCP11_MAX_ENDPOINTS) {
        say(why, why_len, "more than %d endpoints", SVCP11_MAX_ENDPOINTS);
        rv = CKR_GENERAL_ERROR;
        break;
      }
      endpoint_defaults(&cfg->ep[cfg->count++]);
      continue;
    }
    char *eq = strchr(s, '=');
    if (eq == NULL || cfg->count == 0) {
      say(why, why_len, "line %u: expected [endpoint] or name = value inside one", lineno);
      rv = CKR_GENERAL_ERROR;
      break;
    }
    *eq = '\0';
    int r = set_field(&cfg->ep[cfg->count - 1], trim(s), trim(eq + 1));
    if (r != 0) {
      say(why, why_len, "line %u: %s '%s'", lineno, r == -2 ? "unknown setting" : "bad value for",
          trim(s));
      rv = CKR_GENERAL_ERROR;
      break;
    }
  }
  free(copy);
  return rv == CKR_OK ? check_endpoints(cfg, why, why_len) : rv;
}

static CK_RV config_from_file(const char *path, client_config *cfg, char *why, size_t n) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    say(why, n, "%s: %s", path, strerror(errno));
    return CKR_GENERAL_ERROR;
  }
  char text[65536];
  size_t len = fread(text, 1, sizeof text - 1, f);
  int too_long = !feof(f);
  fclose(f);
  if (too_long) {
    say(why, n, "%s: larger than %zu bytes", path, sizeof text - 1);
    return CKR_GENERAL_ERROR;
  }
  text[len] = '\0';
  return config_parse(text, cfg, why, n);
}

static CK_RV config_from_env(client_config *cfg, char *why, size_t n) {
  memset(cfg, 0, sizeof *cfg);
  const char *addr = getenv("SVCD_ADDR");
  if (addr == NULL || *addr == '\0') {
    say(why, n, "neither SVCD_PKCS11_CONF nor SVCD_ADDR is set");
    return CKR_GENERAL_ERROR;
  }
  endpoint_config *ep = &cfg->ep[0];
  endpoint_defaults(ep);
  cfg->count = 1;
  struct {
    const char *var, *field;
  } vars[] = {{"SVCD_CACERT", "cacert"},
              {"SVCD_CLIENT_CERT", "cert"},
              {"SVCD_CLIENT_KEY", "key"},
              {"SVCD_PKCS11_TIMEOUT", "timeout"},
              {"SVCD_PKCS11_KEY_TYPES", "key_types"}};
  if (set_url(ep, addr) != 0) {
    say(why, n, "SVCD_ADDR '%s' is not an http(s) address", addr);
    return CKR_GENERAL_ERROR;
  }
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i].var);
    if (v == NULL || *v == '\0') continue;
    if (set_field(ep, vars[i].field, v) != 0) {
      say(why, n, "bad value for %s", vars[i].var);
      return CKR_GENERAL_ERROR;
    }
  }
  return CKR_OK;
}

CK_RV config_load(client_config *cfg, char *why, size_t why_len) {
  const char *path = getenv("SVCD_PKCS11_CONF");
  if (path != NULL && *path != '\0') return config_from_file(path, cfg, why, why_len);
  return config_from_env(cfg, why, why_len);
}
