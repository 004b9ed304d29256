/* Drives a PKCS#11 module from threads, as a signing program would, and checks every signature
 * with libcrypto against a public key given as a PEM file (never with the module under test).
 *
 *   p11drive load <module> <label> <public.pem> <threads> <count>
 *     each thread: its own session, `count` ECDSA-SHA256 signatures, each over its own message;
 *     prints "signed=N verified=N wall_ms=W cpu_ms=C" and exits 0 only if every one verified.
 *   p11drive once <module> <label>
 *     one ECDSA-SHA256 signature; prints "rv=0x… ms=…" (the fault tests read the CK_RV).
 *   p11drive fork <module> <label> <public.pem>
 *     signs, forks; the child prints what C_GetInfo, C_SignInit on the inherited session,
 *     C_Initialize, C_Finalize and C_Initialize answer there, then signs in a session of its own;
 *     the parent signs again in its session after the child has exited. Prints one line each:
 *     "parent sign=0x… verified=…", "child getinfo=0x… …", "parent after child_exit=… sign=0x… …".
 *   p11drive wait <module> <label> <public.pem>
 *     one session for the life of the process: signs at once, then once more for each line read
 *     on stdin until it ends, printing "rv=0x… ms=… verified=…" after each (the fault tests: the
 *     CK_RV of C_Sign itself, not of the C_OpenSession a fresh process starts with).
 */
#include <dlfcn.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "pkcs11_functions.h"

static CK_FUNCTION_LIST_3_2 *F;
#define CALL(name, ...) ((CK_RV(*)())F->fn[IDX_C_##name])(__VA_ARGS__)

static const char *label;
static EVP_PKEY *pub;
static int count;

static CK_RV find_private(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE *key) {
  CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
  CK_ATTRIBUTE tpl[] = {{CKA_CLASS, &cls, sizeof cls},
                        {CKA_LABEL, (void *)label, strlen(label)}};
  CK_ULONG n = 0;
  CK_RV rv = CALL(FindObjectsInit, s, tpl, 2UL);
  if (rv == CKR_OK) rv = CALL(FindObjects, s, key, 1UL, &n);
  CALL(FindObjectsFinal, s);
  return rv == CKR_OK && n != 1 ? CKR_KEY_HANDLE_INVALID : rv;
}

static CK_RV sign_once(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, const char *msg,
                       unsigned char *sig, CK_ULONG *sig_len) {
  CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
  CK_RV rv = CALL(SignInit, s, &m, key);
  if (rv == CKR_OK) rv = CALL(Sign, s, (CK_BYTE *)msg, (CK_ULONG)strlen(msg), sig, sig_len);
  return rv;
}

/* r ‖ s checked with libcrypto over SHA-256 of the message. */
static int verified(const char *msg, const unsigned char *sig, CK_ULONG len) {
  ECDSA_SIG *es = ECDSA_SIG_new();
  ECDSA_SIG_set0(es, BN_bin2bn(sig, (int)len / 2, NULL), BN_bin2bn(sig + len / 2, (int)len / 2, NULL));
  unsigned char *der = NULL;
  int n = i2d_ECDSA_SIG(es, &der);
  ECDSA_SIG_free(es);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pub) == 1 &&
           EVP_DigestVerify(ctx, der, (size_t)n, (const unsigned char *)msg, strlen(msg)) == 1;
  EVP_MD_CTX_free(ctx);
  OPENSSL_free(der);
  return ok;
}

typedef struct {
  int id, signed_ok, verified_ok;
  CK_RV first_error;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  CK_SESSION_HANDLE s;
  CK_OBJECT_HANDLE key;
  CK_RV rv = CALL(OpenSession, 0UL, CKF_SERIAL_SESSION, NULL, NULL, &s);
  if (rv == CKR_OK) rv = find_private(s, &key);
  for (int i = 0; rv == CKR_OK && i < count; i++) {
    char msg[96];
    snprintf(msg, sizeof msg, "thread %d message %d of the load test %ld", w->id, i, random());
    unsigned char sig[512];
    CK_ULONG len = sizeof sig;
    rv = sign_once(s, key, msg, sig, &len);
    if (rv != CKR_OK) break;
    w->signed_ok++;
    w->verified_ok += verified(msg, sig, len);
  }
  w->first_error = rv;
  CALL(CloseSession, s);
  return NULL;
}

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

static int load(int threads) {
  pthread_t *t = calloc((size_t)threads, sizeof *t);
  worker *w = calloc((size_t)threads, sizeof *w);
  long start = now_ms();
  double cpu0 = cpu_ms();
  for (int i = 0; i < threads; i++) {
    w[i].id = i;
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  int s = 0, v = 0;
  CK_RV err = CKR_OK;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    s += w[i].signed_ok;
    v += w[i].verified_ok;
    if (err == CKR_OK) err = w[i].first_error;
  }
  printf("signed=%d verified=%d wall_ms=%ld cpu_ms=%.0f first_error=0x%lx\n", s, v,
         now_ms() - start, cpu_ms() - cpu0, err);
  free(t);
  free(w);
  return s == threads * count && v == s ? 0 : 1;
}

static int once(void) {
  long start = now_ms();
  CK_SESSION_HANDLE s;
  CK_OBJECT_HANDLE key;
  CK_RV rv = CALL(OpenSession, 0UL, CKF_SERIAL_SESSION, NULL, NULL, &s);
  if (rv == CKR_OK) rv = find_private(s, &key);
  if (rv == CKR_OK) {
    unsigned char sig[512];
    CK_ULONG len = sizeof sig;
    rv = sign_once(s, key, "one message", sig, &len);
  }
  printf("rv=0x%lx ms=%ld\n", rv, now_ms() - start);
  return 0;
}

static CK_RV open_and_find(CK_SESSION_HANDLE *s, CK_OBJECT_HANDLE *key) {
  CK_RV rv = CALL(OpenSession, 0UL, CKF_SERIAL_SESSION, NULL, NULL, s);
  if (rv == CKR_OK) rv = find_private(*s, key);
  return rv;
}

/* One signature over a fixed message; *ok says whether libcrypto verified it. */
static CK_RV sign_checked(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, int *ok) {
  const char *msg = "a message of p11drive";
  unsigned char sig[512];
  CK_ULONG len = sizeof sig;
  CK_RV rv = sign_once(s, key, msg, sig, &len);
  *ok = rv == CKR_OK && verified(msg, sig, len);
  return rv;
}

/* The child may not use what it inherited: every call but C_Finalize is refused until it has
 * finalised and initialised again, and then it signs over connections of its own. */
static void fork_child(CK_SESSION_HANDLE inherited, CK_OBJECT_HANDLE inherited_key) {
  CK_INFO info;
  CK_MECHANISM m = {CKM_ECDSA_SHA256, NULL, 0};
  CK_RV getinfo = CALL(GetInfo, &info);
  CK_RV signinit = CALL(SignInit, inherited, &m, inherited_key);
  CK_RV init_inherited = CALL(Initialize, NULL);
  CK_RV finalize = CALL(Finalize, NULL);
  CK_RV init_fresh = CALL(Initialize, NULL);
  CK_SESSION_HANDLE s = 0;
  CK_OBJECT_HANDLE key;
  int ok = 0;
  CK_RV rv = init_fresh == CKR_OK ? open_and_find(&s, &key) : init_fresh;
  if (rv == CKR_OK) rv = sign_checked(s, key, &ok);
  printf("child getinfo=0x%lx signinit=0x%lx initialize=0x%lx finalize=0x%lx initialize=0x%lx "
         "sign=0x%lx verified=%d\n",
         getinfo, signinit, init_inherited, finalize, init_fresh, rv, ok);
  fflush(stdout);
  if (init_fresh == CKR_OK) CALL(Finalize, NULL);
  _exit(0);
}

static int fork_check(void) {
  CK_SESSION_HANDLE s;
  CK_OBJECT_HANDLE key;
  int ok = 0;
  CK_RV rv = open_and_find(&s, &key);
  if (rv == CKR_OK) rv = sign_checked(s, key, &ok);
  printf("parent sign=0x%lx verified=%d\n", rv, ok);
  fflush(stdout); /* else the child would print the parent's buffered line again */
  if (rv != CKR_OK) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) fork_child(s, key);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  rv = sign_checked(s, key, &ok);
  printf("parent after child_exit=%d sign=0x%lx verified=%d\n",
         WIFEXITED(status) ? WEXITSTATUS(status) : -1, rv, ok);
  CALL(CloseSession, s);
  return 0;
}

static int wait_mode(void) {
  CK_SESSION_HANDLE s;
  CK_OBJECT_HANDLE key;
  CK_RV rv = open_and_find(&s, &key);
  if (rv != CKR_OK) {
    printf("rv=0x%lx ms=0 verified=0\n", rv);
    return 1;
  }
  char line[256];
  do {
    int ok = 0;
    long start = now_ms();
    rv = sign_checked(s, key, &ok);
    printf("rv=0x%lx ms=%ld verified=%d\n", rv, now_ms() - start, ok);
    fflush(stdout); /* the test waits for this line */
  } while (fgets(line, sizeof line, stdin) != NULL);
  CALL(CloseSession, s);
  return 0;
}

static int read_public(const char *path) {
  FILE *f = fopen(path, "r");
  pub = f ? PEM_read_PUBKEY(f, NULL, NULL, NULL) : NULL;
  if (f) fclose(f);
  if (pub == NULL) fprintf(stderr, "p11drive: cannot read %s\n", path);
  return pub != NULL;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[1], "load") == 0 && argc != 7) ||
      ((strcmp(argv[1], "fork") == 0 || strcmp(argv[1], "wait") == 0) && argc != 5)) {
    fprintf(stderr, "usage: p11drive load <module> <label> <public.pem> <threads> <count>\n"
                    "       p11drive once <module> <label>\n"
                    "       p11drive fork <module> <label> <public.pem>\n"
                    "       p11drive wait <module> <label> <public.pem>\n");
    return 2;
  }
  void *lib = dlopen(argv[2], RTLD_NOW);
  CK_RV (*get)(CK_FUNCTION_LIST_3_2 **) = lib ? (CK_RV(*)(CK_FUNCTION_LIST_3_2 **))dlsym(lib, "C_GetFunctionList") : NULL;
  if (get == NULL || get(&F) != CKR_OK) {
    fprintf(stderr, "p11drive: cannot load %s: %s\n", argv[2], dlerror());
    return 2;
  }
  label = argv[3];
  CK_RV rv = CALL(Initialize, NULL);
  if (rv != CKR_OK) {
    printf("rv=0x%lx ms=0\n", rv);
    return strcmp(argv[1], "once") == 0 ? 0 : 1;
  }
  int code;
  if (strcmp(argv[1], "load") == 0) {
    if (!read_public(argv[4])) return 2;
    count = atoi(argv[6]);
    code = load(atoi(argv[5]));
  } else if (strcmp(argv[1], "fork") == 0) {
    if (!read_public(argv[4])) return 2;
    code = fork_check();
  } else if (strcmp(argv[1], "wait") == 0) {
    if (!read_public(argv[4])) return 2;
    code = wait_mode();
  } else {
    code = once();
  }
  CALL(Finalize, NULL);
  return code;
}
