/* The command line of svcd-limit, read once at start, and how the server gives up on it. */
#ifndef SVCD_LIMIT_OPTIONS_H
#define SVCD_LIMIT_OPTIONS_H

struct options {
  const char *socket, *policy, *module, *token, *pin_file, *audit_dir;
  long proxy_uid;
  int threads, workers, checkpoint_every;
  long max_body;
  int audit;
};

extern struct options opt;

/* Prints "svcd-limit: " and the message to stderr, exits 2. */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

/* Fills `opt` from the command line; dies on an unknown, missing or malformed option. */
void parse_options(int argc, char **argv);

#endif
