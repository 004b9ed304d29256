/* Line-oriented driver of the ML-DSA core for cross-checks from Deno. One command per line, hex
 * arguments ("-" = empty), one answer line each:
 *   keygen LEVEL SEED                  -> PK SK
 *   sign LEVEL SK MSG CTX RND          -> SIG      (RND all zero = deterministic)
 *   verify LEVEL PK MSG CTX SIG        -> 1 | 0
 * LEVEL is 44, 65 or 87. Errors answer "error: <reason>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/mldsa.h"
#include "hexio.h"

#define MAX_ARGS 6

static void answer_keygen(const mldsa_params *p, uint8_t **a, size_t *n) {
  if (n[0] != MLDSA_SEED_BYTES) {
    puts("error: seed must be 32 bytes");
    return;
  }
  uint8_t pk[MLDSA_MAX_PK_BYTES], sk[MLDSA_MAX_SK_BYTES];
  if (mldsa_keygen(p, a[0], pk, sk) != 0) {
    puts("error: keygen failed");
    return;
  }
  hex_print(stdout, pk, p->pk_bytes);
  putchar(' ');
  hex_print(stdout, sk, p->sk_bytes);
  putchar('\n');
}

static void answer_sign(const mldsa_params *p, uint8_t **a, size_t *n) {
  if (n[0] != p->sk_bytes || n[3] != MLDSA_RND_BYTES) {
    puts("error: bad secret key or rnd length");
    return;
  }
  uint8_t sig[MLDSA_MAX_SIG_BYTES];
  int rc = mldsa_sign(p, a[0], a[1], n[1], a[2], n[2], a[3], sig);
  if (rc == -2) {
    puts("error: context longer than 255 bytes");
    return;
  }
  if (rc != 0) {
    puts("error: sign failed");
    return;
  }
  hex_print(stdout, sig, p->sig_bytes);
  putchar('\n');
}

static void answer_verify(const mldsa_params *p, uint8_t **a, size_t *n) {
  int rc = mldsa_verify(p, a[0], n[0], a[1], n[1], a[2], n[2], a[3], n[3]);
  if (rc < 0)
    puts("error: verify failed");
  else
    printf("%d\n", rc);
}

static void answer(char *line) {
  char *tok[MAX_ARGS + 1];
  int nt = 0;
  for (char *t = strtok(line, " \t\r\n"); t && nt <= MAX_ARGS; t = strtok(NULL, " \t\r\n"))
    tok[nt++] = t;
  if (nt < 3) {
    puts("error: expected COMMAND LEVEL ARGS...");
    return;
  }
  const mldsa_params *p = mldsa_params_by_level(atoi(tok[1]));
  int want = strcmp(tok[0], "keygen") == 0 ? 1 : 4;
  if (p == NULL || nt != 2 + want) {
    puts("error: bad level or argument count");
    return;
  }
  uint8_t *a[4] = {0};
  size_t n[4] = {0};
  int ok = 1;
  for (int i = 0; i < want; i++)
    if ((a[i] = hex_decode(tok[2 + i], &n[i])) == NULL) ok = 0;
  if (!ok)
    puts("error: bad hex");
  else if (strcmp(tok[0], "keygen") == 0)
    answer_keygen(p, a, n);
  else if (strcmp(tok[0], "sign") == 0)
    answer_sign(p, a, n);
  else if (strcmp(tok[0], "verify") == 0)
    answer_verify(p, a, n);
  else
    puts("error: unknown command");
  for (int i = 0; i < 4; i++) free(a[i]);
}

int main(void) {
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) > 0) {
    answer(line);
    fflush(stdout);
  }
  free(line);
  return 0;
}
