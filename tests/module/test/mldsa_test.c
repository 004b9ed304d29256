/* Properties of the ML-DSA core that need no outside oracle (noble is checked from Deno):
 * round trips for every parameter set, rejection of tampered inputs and malformed encodings. */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/mldsa.h"

static int failures;

#define CHECK(cond, what)                                        \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what); \
      failures++;                                                \
    }                                                            \
  } while (0)

static void test_level(int level) {
  const mldsa_params *p = mldsa_params_by_level(level);
  uint8_t seed[32], rnd[32], msg[100], ctx[255];
  static uint8_t pk[MLDSA_MAX_PK_BYTES], sk[MLDSA_MAX_SK_BYTES], sig[MLDSA_MAX_SIG_BYTES],
      sig2[MLDSA_MAX_SIG_BYTES], pk2[MLDSA_MAX_PK_BYTES], sk2[MLDSA_MAX_SK_BYTES];
  RAND_bytes(seed, sizeof seed);
  RAND_bytes(msg, sizeof msg);
  RAND_bytes(ctx, sizeof ctx);
  CHECK(mldsa_keygen(p, seed, pk, sk) == 0, "keygen");
  CHECK(mldsa_keygen(p, seed, pk2, sk2) == 0, "keygen again");
  CHECK(memcmp(pk, pk2, p->pk_bytes) == 0 && memcmp(sk, sk2, p->sk_bytes) == 0,
        "keygen is a function of the seed");

  for (int round = 0; round < 20; round++) {
    size_t ctxlen = (size_t)(round * 13) % 256;
    RAND_bytes(rnd, sizeof rnd);
    CHECK(mldsa_sign(p, sk, msg, sizeof msg, ctx, ctxlen, rnd, sig) == 0, "sign");
    CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, ctx, ctxlen, sig, p->sig_bytes) == 1,
          "own signature verifies");
    msg[round] ^= 0x80;
    CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, ctx, ctxlen, sig, p->sig_bytes) == 0,
          "changed message fails");
    msg[round] ^= 0x80;
    CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, ctx, ctxlen + 1, sig, p->sig_bytes) ==
              0,
          "longer context fails");
    size_t at = (size_t)round * 997 % p->sig_bytes;
    sig[at] ^= 0x01;
    CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, ctx, ctxlen, sig, p->sig_bytes) == 0,
          "changed signature fails");
    sig[at] ^= 0x01;
    CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, ctx, ctxlen, sig, p->sig_bytes - 1) ==
              0,
          "short signature fails");
    CHECK(mldsa_verify(p, pk, p->pk_bytes - 1, msg, sizeof msg, ctx, ctxlen, sig, p->sig_bytes) ==
              0,
          "short public key fails");
  }

  /* Deterministic: all-zero rnd gives the same signature twice; a fresh rnd gives another. */
  memset(rnd, 0, sizeof rnd);
  CHECK(mldsa_sign(p, sk, msg, sizeof msg, NULL, 0, rnd, sig) == 0, "deterministic sign");
  CHECK(mldsa_sign(p, sk, msg, sizeof msg, NULL, 0, rnd, sig2) == 0, "deterministic sign again");
  CHECK(memcmp(sig, sig2, p->sig_bytes) == 0, "deterministic signatures repeat");
  RAND_bytes(rnd, sizeof rnd);
  CHECK(mldsa_sign(p, sk, msg, sizeof msg, NULL, 0, rnd, sig2) == 0, "hedged sign");
  CHECK(memcmp(sig, sig2, p->sig_bytes) != 0, "hedged signatures differ");

  /* Hints: the counters at the end must not decrease; a decreasing one is malformed. */
  uint8_t *counters = sig + p->sig_bytes - p->k;
  uint8_t saved = counters[0];
  counters[0] = (uint8_t)(p->omega + 1);
  CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, NULL, 0, sig, p->sig_bytes) == 0,
        "hint counter above omega fails");
  counters[0] = saved;
  CHECK(mldsa_verify(p, pk, p->pk_bytes, msg, sizeof msg, NULL, 0, sig, p->sig_bytes) == 1,
        "restored signature verifies");

  CHECK(mldsa_sign(p, sk, msg, sizeof msg, ctx, 256, rnd, sig) == -2, "context of 256 refused");
  printf("ok %s\n", p->name);
}

int main(void) {
  CHECK(mldsa_params_by_level(66) == NULL, "unknown level");
  test_level(44);
  test_level(65);
  test_level(87);
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  puts("mldsa_test: all passed");
  return 0;
}
