/* The options of svcd-limit (see limit.c for what each does) and die(). */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct options opt = {.proxy_uid = -1, .threads = 4, .workers = 16, .checkpoint_every = 1000,
                      .max_body = 1 << 20, .audit = 1};

void die(const char *fmt, ...) {
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

void parse_options(int argc, char **argv) {
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
