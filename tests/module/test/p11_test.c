/* Behaviour tests of libsvcmod.so through its PKCS#11 function table (dlopen, C_GetInterface).
 * Run: build/p11_test [path/to/libsvcmod.so]. Each test uses its own temporary token directory.
 * PKCS5_PBKDF2_HMAC is interposed (the program is linked with -rdynamic) to count the key
 * derivations and their iteration counts at each login. */
#include <dlfcn.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/crypto.h"
#include "../src/mldsa.h"
#include "pkcs11_functions.h"

/* An entry neither of the project's modules implements, typed for a call through the table. */
CK_RV C_EncryptInit(CK_SESSION_HANDLE, CK_MECHANISM *, CK_OBJECT_HANDLE);

static CK_FUNCTION_LIST_3_2 *T;
static void *lib;
/* An exported symbol of the module, typed like the prototype of the same name. */
#define SYM(name) ((__typeof__(&name))dlsym(lib, #name))
#define P11(name) ((__typeof__(&name))T->fn[IDX_##name])

static int failures, checks;
static const char *current = "";

static void fail(int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL [%s] p11_test.c:%d: ", current, line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  failures++;
}

#define EXPECT_RV(expr, want)                                                            \
  do {                                                                                   \
    CK_RV got_ = (expr);                                                                 \
    checks++;                                                                            \
    if (got_ != (CK_RV)(want))                                                           \
      fail(__LINE__, "%s = 0x%lx, want 0x%lx", #expr, got_, (CK_RV)(want));              \
  } while (0)
#define EXPECT(cond)                                    \
  do {                                                  \
    checks++;                                           \
    if (!(cond)) fail(__LINE__, "expected %s", #cond); \
  } while (0)

/* ---- PBKDF2 interposition ------------------------------------------------------------------ */

static pthread_mutex_t kdf_lock = PTHREAD_MUTEX_INITIALIZER;
static int kdf_calls, kdf_last_iter;
/* With the gate on, a derivation announces itself and waits to be released: a test can hold a
 * C_Login inside the module for as long as it needs, without timing assumptions. */
static int kdf_gate;
static sem_t kdf_entered, kdf_release;

__attribute__((visibility("default"))) int PKCS5_PBKDF2_HMAC(const char *pass, int passlen,
                                                               const unsigned char *salt,
                                                               int saltlen, int iter,
                                                               const EVP_MD *digest, int keylen,
                                                               unsigned char *out) {
  typedef int (*real_fn)(const char *, int, const unsigned char *, int, int, const EVP_MD *, int,
                         unsigned char *);
  static real_fn real;
  if (real == NULL) real = (real_fn)dlsym(RTLD_NEXT, "PKCS5_PBKDF2_HMAC");
  pthread_mutex_lock(&kdf_lock);
  kdf_calls++;
  kdf_last_iter = iter;
  int gated = kdf_gate;
  pthread_mutex_unlock(&kdf_lock);
  if (gated) {
    sem_post(&kdf_entered);
    sem_wait(&kdf_release);
  }
  return real(pass, passlen, salt, saltlen, iter, digest, keylen, out);
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static const char *module_path = "build/libsvcmod.so";
static const char *self_path;
static char tokdir[256], confpath[300];
static CK_UTF8CHAR SO_PIN[] = "so-pin-1234";
static CK_UTF8CHAR USER_PIN[] = "user-pin-5678";
#define LEN(pin) ((CK_ULONG)(sizeof(pin) - 1))

static void write_conf(const char *extra) {
  FILE *f = fopen(confpath, "w");
  fprintf(f, "# svcmod test\ntokendir = %s\n%s", tokdir, extra ? extra : "");
  fclose(f);
  setenv("SVCMOD_CONF", confpath, 1);
}

/* A fresh token directory and config; `extra` adds config lines. */
static void fresh_token_dir(const char *extra) {
  snprintf(tokdir, sizeof tokdir, "/tmp/svcmod-test-XXXXXX");
  if (mkdtemp(tokdir) == NULL) {
    perror("mkdtemp");
    exit(2);
  }
  snprintf(confpath, sizeof confpath, "%s.conf", tokdir);
  write_conf(extra);
}

static void remove_token_dir(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", tokdir, confpath);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tokdir);
}

static void label32(CK_UTF8CHAR out[32], const char *s) {
  memset(out, ' ', 32);
  memcpy(out, s, strlen(s));
}

/* Initialise the module, the token (SO PIN) and the user PIN. Leaves the module initialised and
 * no session open. */
static void setup_token(void) {
  CK_UTF8CHAR label[32];
  label32(label, "svcmod-test");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  EXPECT_RV(P11(C_InitToken)(0, SO_PIN, LEN(SO_PIN), label), CKR_OK);
  CK_SESSION_HANDLE h;
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
  EXPECT_RV(P11(C_Login)(h, CKU_SO, SO_PIN, LEN(SO_PIN)), CKR_OK);
  EXPECT_RV(P11(C_InitPIN)(h, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT_RV(P11(C_Logout)(h), CKR_OK);
  EXPECT_RV(P11(C_CloseSession)(h), CKR_OK);
}

static CK_SESSION_HANDLE open_rw(void) {
  CK_SESSION_HANDLE h = 0;
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
  return h;
}

/* Runs this program again as a separate process: `self child <what>`; returns its exit code. */
static int run_child(const char *what) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(self_path, self_path, "child", what, module_path, (char *)NULL);
    _exit(99);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 98;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_interface(void) {
  current = "interface";
  CK_INTERFACE *it = NULL;
  EXPECT_RV(SYM(C_GetInterface)((CK_UTF8CHAR *)"PKCS 11", NULL, &it, 0), CKR_OK);
  EXPECT(it != NULL && strcmp((char *)it->pInterfaceName, "PKCS 11") == 0);
  CK_FUNCTION_LIST_3_2 *t = it->pFunctionList;
  EXPECT(t->version.major == 3 && t->version.minor == 2);
  /* Offsets 760 and 768 hold C_VerifySignatureInit and C_VerifySignature. */
  void *vsi = dlsym(lib, "C_VerifySignatureInit");
  EXPECT(*(void **)((char *)t + 760) == vsi && vsi != NULL);
  EXPECT(*(void **)((char *)t + 768) == dlsym(lib, "C_VerifySignature"));
  EXPECT(*(void **)((char *)t + 8) == dlsym(lib, "C_Initialize"));
  for (int i = 0; i < 104; i++) EXPECT(t->fn[i] != NULL);
  /* An entry not implemented answers CKR_FUNCTION_NOT_SUPPORTED. */
  EXPECT_RV(((__typeof__(&C_EncryptInit))t->fn[IDX_C_EncryptInit])(1, NULL, 0),
            CKR_FUNCTION_NOT_SUPPORTED);
  CK_VERSION v30 = {3, 0}, v99 = {9, 9};
  CK_INTERFACE *it30 = NULL;
  EXPECT_RV(SYM(C_GetInterface)((CK_UTF8CHAR *)"PKCS 11", &v30, &it30, 0), CKR_OK);
  EXPECT(it30 && ((CK_FUNCTION_LIST_3_2 *)it30->pFunctionList)->version.minor == 0);
  EXPECT_RV(SYM(C_GetInterface)((CK_UTF8CHAR *)"PKCS 11", &v99, &it30, 0), CKR_ARGUMENTS_BAD);
  EXPECT_RV(SYM(C_GetInterface)((CK_UTF8CHAR *)"Vendor", NULL, &it30, 0), CKR_ARGUMENTS_BAD);
  EXPECT_RV(SYM(C_GetInterface)(NULL, NULL, &it30, CKF_INTERFACE_FORK_SAFE), CKR_ARGUMENTS_BAD);
  CK_ULONG n = 0;
  EXPECT_RV(SYM(C_GetInterfaceList)(NULL, &n), CKR_OK);
  EXPECT(n == 2);
  CK_FUNCTION_LIST_3_2 *fl = NULL;
  EXPECT_RV(SYM(C_GetFunctionList)(&fl), CKR_OK);
  EXPECT(fl && fl->version.major == 2 && fl->version.minor == 40);
  EXPECT(fl && fl->fn[IDX_C_Sign] == t->fn[IDX_C_Sign]);
}

static void test_config_errors(void) {
  current = "config";
  fresh_token_dir(NULL);
  unsetenv("SVCMOD_CONF");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  setenv("SVCMOD_CONF", "/nonexistent/svcmod.conf", 1);
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  write_conf("secure_heap_kb = 63\n");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  write_conf("secure_heap_kb = 8193\n");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  write_conf("tokendirectory = /tmp\n");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none", tokdir);
  FILE *f = fopen(confpath, "w");
  fprintf(f, "tokendir = %s\n", missing);
  fclose(f);
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  write_conf("secure_heap_kb = 64\n");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_CRYPTOKI_ALREADY_INITIALIZED);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
  remove_token_dir();
}

static void test_uninitialised_token(void) {
  current = "uninitialised token";
  fresh_token_dir(NULL);
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  CK_TOKEN_INFO ti;
  EXPECT_RV(P11(C_GetTokenInfo)(0, &ti), CKR_OK);
  EXPECT(!(ti.flags & CKF_TOKEN_INITIALIZED));
  CK_SESSION_HANDLE h;
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_TOKEN_NOT_INITIALIZED);
  CK_UTF8CHAR label[32];
  label32(label, "first");
  EXPECT_RV(P11(C_InitToken)(0, SO_PIN, 3, label), CKR_PIN_LEN_RANGE);
  EXPECT_RV(P11(C_InitToken)(0, SO_PIN, LEN(SO_PIN), label), CKR_OK);
  EXPECT_RV(P11(C_GetTokenInfo)(0, &ti), CKR_OK);
  EXPECT(ti.flags & CKF_TOKEN_INITIALIZED);
  EXPECT(!(ti.flags & CKF_USER_PIN_INITIALIZED));
  EXPECT(memcmp(ti.label, label, 32) == 0);
  EXPECT(ti.ulMaxSessionCount == 127);
  EXPECT_RV(P11(C_OpenSession)(0, 0, NULL, NULL, &h), CKR_SESSION_PARALLEL_NOT_SUPPORTED);
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_OK);
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_USER_PIN_NOT_INITIALIZED);
  EXPECT_RV(P11(C_InitToken)(0, SO_PIN, LEN(SO_PIN), label), CKR_SESSION_EXISTS);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* Login state is per process; a second C_Login answers 0x100; every login derives the PIN key
 * with 200 000 PBKDF2 iterations, a wrong PIN included. */
static void test_login(void) {
  current = "login";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE a = open_rw(), b = open_rw();
  CK_SESSION_INFO si;
  EXPECT_RV(P11(C_GetSessionInfo)(b, &si), CKR_OK);
  EXPECT(si.state == CKS_RW_PUBLIC_SESSION);

  kdf_calls = 0;
  kdf_last_iter = 0;
  EXPECT_RV(P11(C_Login)(a, CKU_USER, (CK_UTF8CHAR *)"wrong-pin", 9), CKR_PIN_INCORRECT);
  EXPECT(kdf_calls == 1 && kdf_last_iter == 200000);
  EXPECT_RV(P11(C_Login)(a, CKU_USER, (CK_UTF8CHAR *)"x", 1), CKR_PIN_INCORRECT);
  EXPECT(kdf_calls == 2 && kdf_last_iter == 200000);
  EXPECT_RV(P11(C_Login)(a, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT(kdf_calls == 3 && kdf_last_iter == 200000);
  /* Every session of the process is logged in now. */
  EXPECT_RV(P11(C_GetSessionInfo)(b, &si), CKR_OK);
  EXPECT(si.state == CKS_RW_USER_FUNCTIONS);
  EXPECT_RV(P11(C_Login)(b, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_USER_ALREADY_LOGGED_IN);
  EXPECT_RV(P11(C_Login)(b, CKU_USER, (CK_UTF8CHAR *)"any", 3), CKR_USER_ALREADY_LOGGED_IN);
  EXPECT_RV(P11(C_Login)(b, CKU_SO, SO_PIN, LEN(SO_PIN)), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
  /* The successful login reset the failure counter. */
  CK_TOKEN_INFO ti;
  EXPECT_RV(P11(C_GetTokenInfo)(0, &ti), CKR_OK);
  EXPECT(!(ti.flags & (CKF_USER_PIN_COUNT_LOW | CKF_USER_PIN_LOCKED)));
  /* Another process does not inherit this login: it sees a public session and logs in itself. */
  EXPECT(run_child("login-fresh") == 0);
  EXPECT_RV(P11(C_Logout)(a), CKR_OK);
  EXPECT_RV(P11(C_Logout)(a), CKR_USER_NOT_LOGGED_IN);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* Five consecutive failures lock the role; the lock is in token.db, so other processes see it. */
static void test_lockout(void) {
  current = "lockout";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  CK_TOKEN_INFO ti;
  for (int i = 1; i <= 5; i++) {
    EXPECT_RV(P11(C_Login)(h, CKU_USER, (CK_UTF8CHAR *)"bad-pin", 7), CKR_PIN_INCORRECT);
    EXPECT_RV(P11(C_GetTokenInfo)(0, &ti), CKR_OK);
    if (i < 4) EXPECT((ti.flags & CKF_USER_PIN_COUNT_LOW) && !(ti.flags & CKF_USER_PIN_FINAL_TRY));
    if (i == 4) EXPECT(ti.flags & CKF_USER_PIN_FINAL_TRY);
  }
  EXPECT(ti.flags & CKF_USER_PIN_LOCKED);
  kdf_calls = 0;
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_PIN_LOCKED);
  EXPECT(kdf_calls == 0); /* locked: refused before any derivation */
  EXPECT(run_child("expect-locked") == 0);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  /* Still locked after the module is reopened. */
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_PIN_LOCKED);
  /* The SO is a separate role and unlocks the user by setting a new PIN. */
  EXPECT_RV(P11(C_Login)(h, CKU_SO, SO_PIN, LEN(SO_PIN)), CKR_OK);
  EXPECT_RV(P11(C_InitPIN)(h, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT_RV(P11(C_Logout)(h), CKR_OK);
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT_RV(P11(C_Logout)(h), CKR_OK);
  /* Four failures then a success: the counter starts again. */
  for (int i = 0; i < 4; i++)
    EXPECT_RV(P11(C_Login)(h, CKU_USER, (CK_UTF8CHAR *)"bad-pin", 7), CKR_PIN_INCORRECT);
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT_RV(P11(C_Logout)(h), CKR_OK);
  EXPECT_RV(P11(C_Login)(h, CKU_USER, (CK_UTF8CHAR *)"bad-pin", 7), CKR_PIN_INCORRECT);
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  /* The SO role locks the same way. */
  EXPECT_RV(P11(C_Logout)(h), CKR_OK);
  for (int i = 0; i < 5; i++)
    EXPECT_RV(P11(C_Login)(h, CKU_SO, (CK_UTF8CHAR *)"bad-pin", 7), CKR_PIN_INCORRECT);
  EXPECT_RV(P11(C_Login)(h, CKU_SO, SO_PIN, LEN(SO_PIN)), CKR_PIN_LOCKED);
  EXPECT_RV(P11(C_GetTokenInfo)(0, &ti), CKR_OK);
  EXPECT(ti.flags & CKF_SO_PIN_LOCKED);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

static int open_until_refused(CK_SESSION_HANDLE *hs, int max, CK_RV *refusal) {
  int n = 0;
  for (; n < max; n++) {
    CK_RV rv = P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &hs[n]);
    if (rv != CKR_OK) {
      *refusal = rv;
      break;
    }
  }
  return n;
}

/* The session cap (127) and the secure heap (24 KiB per session) both answer CKR_HOST_MEMORY. */
static void test_session_limits(void) {
  current = "session limits";
  CK_SESSION_HANDLE hs[200];
  CK_RV refusal = CKR_OK;
  fresh_token_dir("secure_heap_kb = 8192\n");
  setup_token();
  EXPECT(open_until_refused(hs, 200, &refusal) == 127);
  EXPECT(refusal == CKR_HOST_MEMORY);
  EXPECT_RV(P11(C_CloseSession)(hs[5]), CKR_OK);
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &hs[5]), CKR_OK);
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &hs[199]), CKR_HOST_MEMORY);
  EXPECT_RV(P11(C_CloseAllSessions)(0), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  write_conf("secure_heap_kb = 64\n"); /* room for two 24 KiB reservations */
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  refusal = CKR_OK;
  EXPECT(open_until_refused(hs, 200, &refusal) == 2);
  EXPECT(refusal == CKR_HOST_MEMORY);
  EXPECT_RV(P11(C_CloseSession)(hs[0]), CKR_OK);
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &hs[0]), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  write_conf(""); /* default 1024 KiB: 42 reservations */
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  refusal = CKR_OK;
  EXPECT(open_until_refused(hs, 200, &refusal) == 1024 / 24);
  EXPECT(refusal == CKR_HOST_MEMORY);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  write_conf("max_sessions = 3\nsecure_heap_kb = 8192\n");
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  refusal = CKR_OK;
  EXPECT(open_until_refused(hs, 200, &refusal) == 3);
  EXPECT(refusal == CKR_HOST_MEMORY);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* C_Initialize in a child forked from an initialised parent is CKR_FUNCTION_FAILED. */
static void test_fork(void) {
  current = "fork";
  fresh_token_dir(NULL);
  setup_token();
  pid_t pid = fork();
  if (pid == 0) {
    CK_RV rv = P11(C_Initialize)(NULL);
    _exit(rv == CKR_FUNCTION_FAILED ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* In the parent itself it is the ordinary answer. */
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_CRYPTOKI_ALREADY_INITIALIZED);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  /* A child of a parent that is not initialised initialises normally. */
  pid = fork();
  if (pid == 0) {
    CK_RV rv = P11(C_Initialize)(NULL);
    _exit(rv == CKR_OK ? 0 : 1);
  }
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  remove_token_dir();
}

typedef struct {
  CK_SESSION_HANDLE h;
  CK_RV rv;
} login_job;

static void *login_thread(void *arg) {
  login_job *j = arg;
  j->rv = P11(C_Login)(j->h, CKU_USER, USER_PIN, LEN(USER_PIN));
  return NULL;
}

/* While one call runs on a session (a C_Login held inside its PBKDF2 by the gate), every other
 * call on the same handle answers CKR_OPERATION_ACTIVE; other sessions are not affected, and the
 * first call completes normally. */
static void test_concurrent_calls(void) {
  current = "concurrent calls";
  fresh_token_dir(NULL);
  setup_token();
  sem_init(&kdf_entered, 0, 0);
  sem_init(&kdf_release, 0, 0);
  for (int round = 0; round < 3; round++) {
    CK_SESSION_HANDLE a = open_rw(), b = open_rw();
    login_job j = {a, 0};
    pthread_t th;
    kdf_gate = 1;
    pthread_create(&th, NULL, login_thread, &j);
    sem_wait(&kdf_entered); /* the login is inside the module now */
    CK_SESSION_INFO si;
    CK_MECHANISM m = {CKM_SHA256, NULL, 0};
    EXPECT_RV(P11(C_GetSessionInfo)(a, &si), CKR_OPERATION_ACTIVE);
    EXPECT_RV(P11(C_DigestInit)(a, &m), CKR_OPERATION_ACTIVE);
    EXPECT_RV(P11(C_Login)(a, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OPERATION_ACTIVE);
    EXPECT_RV(P11(C_CloseSession)(a), CKR_OPERATION_ACTIVE);
    EXPECT_RV(P11(C_GetSessionInfo)(b, &si), CKR_OK);
    EXPECT(si.state == CKS_RW_PUBLIC_SESSION);
    kdf_gate = 0;
    sem_post(&kdf_release);
    pthread_join(th, NULL);
    EXPECT_RV(j.rv, CKR_OK); /* the first call is not disturbed */
    EXPECT_RV(P11(C_GetSessionInfo)(a, &si), CKR_OK);
    EXPECT(si.state == CKS_RW_USER_FUNCTIONS);
    EXPECT_RV(P11(C_CloseSession)(a), CKR_OK);
    EXPECT_RV(P11(C_CloseSession)(b), CKR_OK); /* last session: logs out */
  }
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

static CK_ATTRIBUTE attr(CK_ATTRIBUTE_TYPE t, void *v, CK_ULONG n) { return (CK_ATTRIBUTE){t, v, n}; }

static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

/* ML-DSA keys: generated from CKA_SEED like the core, private parts sensitive, public readable,
 * signatures verify inside and outside, deterministic hedge repeats. */
static void test_mldsa_keys(void) {
  current = "ML-DSA keys";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  const int levels[3] = {44, 65, 87};
  for (CK_ULONG set = 1; set <= 3; set++) {
    const mldsa_params *p = mldsa_params_by_level(levels[set - 1]);
    uint8_t seed[32], pk[MLDSA_MAX_PK_BYTES], sk[MLDSA_MAX_SK_BYTES];
    for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(i * 7 + set);
    mldsa_keygen(p, seed, pk, sk);
    CK_MECHANISM gen = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE pub_t[] = {attr(CKA_PARAMETER_SET, &set, sizeof set), attr(CKA_TOKEN, &yes, 1),
                            attr(CKA_LABEL, "mldsa", 5)};
    CK_ATTRIBUTE priv_t[] = {attr(CKA_TOKEN, &yes, 1), attr(CKA_LABEL, "mldsa", 5),
                             attr(CKA_SEED, seed, 32)};
    CK_OBJECT_HANDLE pub, priv;
    EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pub_t, 3, priv_t, 3, &pub, &priv), CKR_OK);
    uint8_t got[MLDSA_MAX_PK_BYTES];
    CK_ATTRIBUTE q[] = {attr(CKA_VALUE, got, sizeof got)};
    EXPECT_RV(P11(C_GetAttributeValue)(h, pub, q, 1), CKR_OK);
    EXPECT(q[0].ulValueLen == p->pk_bytes && memcmp(got, pk, p->pk_bytes) == 0);
    CK_ATTRIBUTE sq[] = {attr(CKA_VALUE, got, sizeof got), attr(CKA_SEED, got, sizeof got)};
    EXPECT_RV(P11(C_GetAttributeValue)(h, priv, sq, 2), CKR_ATTRIBUTE_SENSITIVE);
    EXPECT(sq[0].ulValueLen == CK_UNAVAILABLE_INFORMATION);
    EXPECT(sq[1].ulValueLen == CK_UNAVAILABLE_INFORMATION);
    CK_BBOOL sens = 0, extr = 1;
    CK_ULONG ps = 0;
    CK_ATTRIBUTE fq[] = {attr(CKA_SENSITIVE, &sens, 1), attr(CKA_EXTRACTABLE, &extr, 1),
                         attr(CKA_PARAMETER_SET, &ps, sizeof ps)};
    EXPECT_RV(P11(C_GetAttributeValue)(h, priv, fq, 3), CKR_OK);
    EXPECT(sens == CK_TRUE && extr == CK_FALSE && ps == set);

    const char *msg = "message for the module";
    uint8_t ctx[3] = {1, 2, 3};
    CK_SIGN_ADDITIONAL_CONTEXT det = {CKH_DETERMINISTIC_REQUIRED, ctx, 3};
    CK_MECHANISM m = {CKM_ML_DSA, &det, sizeof det};
    uint8_t sig1[MLDSA_MAX_SIG_BYTES], sig2[MLDSA_MAX_SIG_BYTES], want[MLDSA_MAX_SIG_BYTES];
    CK_ULONG l1 = 0, l2 = sizeof sig2;
    EXPECT_RV(P11(C_SignInit)(h, &m, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), NULL, &l1), CKR_OK);
    EXPECT(l1 == p->sig_bytes);
    l1 = 10;
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), sig1, &l1), CKR_BUFFER_TOO_SMALL);
    l1 = sizeof sig1;
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), sig1, &l1), CKR_OK);
    EXPECT_RV(P11(C_SignInit)(h, &m, priv), CKR_OK);
    EXPECT_RV(P11(C_SignUpdate)(h, (CK_BYTE *)msg, 5), CKR_OK);
    EXPECT_RV(P11(C_SignUpdate)(h, (CK_BYTE *)msg + 5, strlen(msg) - 5), CKR_OK);
    EXPECT_RV(P11(C_SignFinal)(h, sig2, &l2), CKR_OK);
    uint8_t zero[32] = {0};
    mldsa_sign(p, sk, (const uint8_t *)msg, strlen(msg), ctx, 3, zero, want);
    EXPECT(memcmp(sig1, want, p->sig_bytes) == 0 && memcmp(sig2, want, p->sig_bytes) == 0);
    /* Hedged: differs, still verifies through C_Verify and C_VerifySignature. */
    CK_SIGN_ADDITIONAL_CONTEXT hedged = {CKH_HEDGE_REQUIRED, ctx, 3};
    CK_MECHANISM mh = {CKM_ML_DSA, &hedged, sizeof hedged};
    l2 = sizeof sig2;
    EXPECT_RV(P11(C_SignInit)(h, &mh, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), sig2, &l2), CKR_OK);
    EXPECT(memcmp(sig1, sig2, p->sig_bytes) != 0);
    EXPECT(mldsa_verify(p, pk, p->pk_bytes, (const uint8_t *)msg, strlen(msg), ctx, 3, sig2,
                        l2) == 1);
    EXPECT_RV(P11(C_VerifyInit)(h, &mh, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, (CK_BYTE *)msg, strlen(msg), sig2, l2), CKR_OK);
    EXPECT_RV(P11(C_VerifySignatureInit)(h, &m, pub, sig2, l2), CKR_OK);
    EXPECT_RV(P11(C_VerifySignature)(h, (CK_BYTE *)msg, strlen(msg)), CKR_OK);
    sig2[10] ^= 1;
    EXPECT_RV(P11(C_VerifyInit)(h, &m, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, (CK_BYTE *)msg, strlen(msg), sig2, l2), CKR_SIGNATURE_INVALID);
    EXPECT_RV(P11(C_VerifyInit)(h, &m, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, (CK_BYTE *)msg, strlen(msg), sig2, l2 - 1), CKR_SIGNATURE_LEN_RANGE);
    EXPECT_RV(P11(C_VerifySignatureInit)(h, &m, pub, sig2, l2 + 1), CKR_SIGNATURE_LEN_RANGE);
    /* Context over 255 bytes and unknown hedge values are refused. */
    uint8_t big[256] = {0};
    CK_SIGN_ADDITIONAL_CONTEXT longctx = {CKH_HEDGE_PREFERRED, big, 256};
    CK_MECHANISM ml = {CKM_ML_DSA, &longctx, sizeof longctx};
    EXPECT_RV(P11(C_SignInit)(h, &ml, priv), CKR_MECHANISM_PARAM_INVALID);
    CK_SIGN_ADDITIONAL_CONTEXT badhedge = {7, NULL, 0};
    CK_MECHANISM mb = {CKM_ML_DSA, &badhedge, sizeof badhedge};
    EXPECT_RV(P11(C_SignInit)(h, &mb, priv), CKR_MECHANISM_PARAM_INVALID);
    /* No parameter: hedge preferred, empty context. */
    CK_MECHANISM plain = {CKM_ML_DSA, NULL, 0};
    l2 = sizeof sig2;
    EXPECT_RV(P11(C_SignInit)(h, &plain, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), sig2, &l2), CKR_OK);
    EXPECT(mldsa_verify(p, pk, p->pk_bytes, (const uint8_t *)msg, strlen(msg), NULL, 0, sig2, l2) ==
           1);
    /* Mechanism and key type must agree. */
    CK_MECHANISM ed = {CKM_EDDSA, NULL, 0};
    EXPECT_RV(P11(C_SignInit)(h, &ed, priv), CKR_KEY_TYPE_INCONSISTENT);
    EXPECT_RV(P11(C_SignInit)(h, &plain, pub), CKR_KEY_FUNCTION_NOT_PERMITTED);
  }
  /* Parameter set: required in the public template, and only 1..3. */
  CK_MECHANISM gen = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0};
  CK_ULONG bad = 4;
  CK_ATTRIBUTE pt[] = {attr(CKA_PARAMETER_SET, &bad, sizeof bad)};
  CK_OBJECT_HANDLE x, y;
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pt, 0, NULL, 0, &x, &y), CKR_TEMPLATE_INCOMPLETE);
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pt, 1, NULL, 0, &x, &y),
            CKR_PARAMETER_SET_NOT_SUPPORTED);
  CK_ATTRIBUTE extractable[] = {attr(CKA_EXTRACTABLE, &yes, 1)};
  CK_ULONG set = 2;
  CK_ATTRIBUTE pt2[] = {attr(CKA_PARAMETER_SET, &set, sizeof set)};
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pt2, 1, extractable, 1, &x, &y),
            CKR_ATTRIBUTE_VALUE_INVALID);
  CK_ATTRIBUTE insensitive[] = {attr(CKA_SENSITIVE, &no, 1)};
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pt2, 1, insensitive, 1, &x, &y),
            CKR_ATTRIBUTE_VALUE_INVALID);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* mu of FIPS 204 Algorithm 7 line 6 with an empty context, made here with libcrypto alone (not the
 * module's core): SHAKE256(SHAKE256(pk, 64) || 0x00 || 0x00 || msg, 64). */
static void external_mu(const uint8_t *pk, size_t pklen, const char *msg, uint8_t mu[64]) {
  uint8_t tr[64];
  const uint8_t prefix[2] = {0, 0};
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  int ok = c != NULL && EVP_DigestInit_ex(c, EVP_shake256(), NULL) &&
           EVP_DigestUpdate(c, pk, pklen) && EVP_DigestFinalXOF(c, tr, 64) &&
           EVP_DigestInit_ex(c, EVP_shake256(), NULL) && EVP_DigestUpdate(c, tr, 64) &&
           EVP_DigestUpdate(c, prefix, 2) && EVP_DigestUpdate(c, msg, strlen(msg)) &&
           EVP_DigestFinalXOF(c, mu, 64);
  EVP_MD_CTX_free(c);
  EXPECT(ok);
}

/* CKM_ML_DSA_EXTERNAL_MU (0x403c): signing mu gives the pure ML-DSA signature over the message mu
 * was made from — deterministic, byte for byte the module's CKM_ML_DSA signature with an empty
 * context; single-part, 64-byte input, no context parameter. */
/* $SVCMOD_HIDE_MECHANISMS: the listed mechanisms vanish from the list and the info, and are
 * refused at C_SignInit/C_VerifyInit as a module without them would; a malformed list fails
 * C_Initialize. */
static void test_hidden_mechanisms(void) {
  current = "hidden mechanisms";
  fresh_token_dir(NULL);
  setup_token();
  CK_ULONG all = 0;
  EXPECT_RV(P11(C_GetMechanismList)(0, NULL, &all), CKR_OK);
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_ULONG set = 2;
  CK_MECHANISM gen = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0};
  CK_ATTRIBUTE priv_t[] = {attr(CKA_TOKEN, &yes, sizeof yes)};
  CK_ATTRIBUTE pub_tok[] = {attr(CKA_PARAMETER_SET, &set, sizeof set),
                            attr(CKA_TOKEN, &yes, sizeof yes)};
  CK_OBJECT_HANDLE pub, priv;
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pub_tok, 2, priv_t, 1, &pub, &priv), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  setenv("SVCMOD_HIDE_MECHANISMS", "0x403c,0x1043", 1);
  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  CK_ULONG shown = 0;
  EXPECT_RV(P11(C_GetMechanismList)(0, NULL, &shown), CKR_OK);
  EXPECT(shown == all - 1); /* 0x1043 (CKM_ECDSA_SHA384) is not offered anyway */
  CK_MECHANISM_TYPE list[32];
  CK_ULONG n = 32;
  EXPECT_RV(P11(C_GetMechanismList)(0, list, &n), CKR_OK);
  EXPECT(n == shown);
  for (CK_ULONG i = 0; i < n; i++) EXPECT(list[i] != CKM_ML_DSA_EXTERNAL_MU);
  CK_MECHANISM_INFO info;
  EXPECT_RV(P11(C_GetMechanismInfo)(0, CKM_ML_DSA_EXTERNAL_MU, &info), CKR_MECHANISM_INVALID);
  EXPECT_RV(P11(C_GetMechanismInfo)(0, CKM_ML_DSA, &info), CKR_OK);
  h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
  CK_ATTRIBUTE find[] = {attr(CKA_CLASS, &cls, sizeof cls)};
  CK_ULONG found = 0;
  EXPECT_RV(P11(C_FindObjectsInit)(h, find, 1), CKR_OK);
  EXPECT_RV(P11(C_FindObjects)(h, &priv, 1, &found), CKR_OK);
  EXPECT_RV(P11(C_FindObjectsFinal)(h), CKR_OK);
  EXPECT(found == 1);
  CK_MECHANISM by_mu = {CKM_ML_DSA_EXTERNAL_MU, NULL, 0};
  EXPECT_RV(P11(C_SignInit)(h, &by_mu, priv), CKR_MECHANISM_INVALID);
  CK_MECHANISM plain = {CKM_ML_DSA, NULL, 0};
  EXPECT_RV(P11(C_SignInit)(h, &plain, priv), CKR_OK);
  uint8_t sig[MLDSA_MAX_SIG_BYTES];
  CK_ULONG l = sizeof sig;
  EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)"m", 1, sig, &l), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  const char *bad[] = {"0x403c;1", "x", "0x403c,", "-1", "1,2,3,4,5,6,7,8,9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("SVCMOD_HIDE_MECHANISMS", bad[i], 1);
    EXPECT_RV(P11(C_Initialize)(NULL), CKR_GENERAL_ERROR);
  }
  unsetenv("SVCMOD_HIDE_MECHANISMS");
  remove_token_dir();
}

static void test_external_mu(void) {
  current = "ML-DSA external mu";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_MECHANISM_INFO info = {0, 0, 0};
  EXPECT_RV(P11(C_GetMechanismInfo)(0, CKM_ML_DSA_EXTERNAL_MU, &info), CKR_OK);
  EXPECT((info.flags & (CKF_SIGN | CKF_VERIFY)) == (CKF_SIGN | CKF_VERIFY));
  const char *msg = "the message whose mu is signed";
  for (CK_ULONG set = 1; set <= 3; set++) {
    CK_MECHANISM gen = {CKM_ML_DSA_KEY_PAIR_GEN, NULL, 0};
    CK_ATTRIBUTE pub_t[] = {attr(CKA_PARAMETER_SET, &set, sizeof set)};
    CK_OBJECT_HANDLE pub, priv;
    EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, pub_t, 1, NULL, 0, &pub, &priv), CKR_OK);
    uint8_t pk[MLDSA_MAX_PK_BYTES];
    CK_ATTRIBUTE q[] = {attr(CKA_VALUE, pk, sizeof pk)};
    EXPECT_RV(P11(C_GetAttributeValue)(h, pub, q, 1), CKR_OK);
    uint8_t mu[64];
    external_mu(pk, q[0].ulValueLen, msg, mu);

    CK_SIGN_ADDITIONAL_CONTEXT det = {CKH_DETERMINISTIC_REQUIRED, NULL, 0};
    CK_MECHANISM by_mu = {CKM_ML_DSA_EXTERNAL_MU, &det, sizeof det};
    CK_MECHANISM by_msg = {CKM_ML_DSA, &det, sizeof det};
    uint8_t s_mu[MLDSA_MAX_SIG_BYTES], s_msg[MLDSA_MAX_SIG_BYTES];
    CK_ULONG l_mu = sizeof s_mu, l_msg = sizeof s_msg;
    EXPECT_RV(P11(C_SignInit)(h, &by_mu, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, mu, 64, s_mu, &l_mu), CKR_OK);
    EXPECT_RV(P11(C_SignInit)(h, &by_msg, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), s_msg, &l_msg), CKR_OK);
    EXPECT(l_mu == l_msg && memcmp(s_mu, s_msg, l_mu) == 0);
    /* The message form verifies it, and so does the mu form. */
    CK_MECHANISM plain = {CKM_ML_DSA, NULL, 0};
    EXPECT_RV(P11(C_VerifyInit)(h, &plain, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, (CK_BYTE *)msg, strlen(msg), s_mu, l_mu), CKR_OK);
    CK_MECHANISM mu_plain = {CKM_ML_DSA_EXTERNAL_MU, NULL, 0};
    EXPECT_RV(P11(C_VerifyInit)(h, &mu_plain, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, mu, 64, s_mu, l_mu), CKR_OK);
    /* Hedged (no parameter): another signature, valid over the message. */
    uint8_t s_h[MLDSA_MAX_SIG_BYTES];
    CK_ULONG l_h = sizeof s_h;
    EXPECT_RV(P11(C_SignInit)(h, &mu_plain, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, mu, 64, s_h, &l_h), CKR_OK);
    EXPECT(l_h == l_mu && memcmp(s_h, s_mu, l_h) != 0);
    EXPECT_RV(P11(C_VerifyInit)(h, &plain, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, (CK_BYTE *)msg, strlen(msg), s_h, l_h), CKR_OK);
    /* A changed mu or signature does not verify. */
    mu[0] ^= 1;
    EXPECT_RV(P11(C_VerifyInit)(h, &mu_plain, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, mu, 64, s_mu, l_mu), CKR_SIGNATURE_INVALID);
    /* mu is exactly 64 bytes, in one part; a context belongs in mu, not in the parameter. */
    l_h = sizeof s_h;
    EXPECT_RV(P11(C_SignInit)(h, &by_mu, priv), CKR_OK);
    EXPECT_RV(P11(C_Sign)(h, mu, 63, s_h, &l_h), CKR_DATA_LEN_RANGE);
    EXPECT_RV(P11(C_VerifyInit)(h, &mu_plain, pub), CKR_OK);
    EXPECT_RV(P11(C_Verify)(h, mu, 65, s_mu, l_mu), CKR_DATA_LEN_RANGE);
    EXPECT_RV(P11(C_SignInit)(h, &by_mu, priv), CKR_OK);
    EXPECT_RV(P11(C_SignUpdate)(h, mu, 32), CKR_FUNCTION_NOT_SUPPORTED);
    EXPECT_RV(P11(C_SignFinal)(h, s_h, &l_h), CKR_OPERATION_NOT_INITIALIZED);
    uint8_t ctx[1] = {1};
    CK_SIGN_ADDITIONAL_CONTEXT with_ctx = {CKH_DETERMINISTIC_REQUIRED, ctx, 1};
    CK_MECHANISM bad = {CKM_ML_DSA_EXTERNAL_MU, &with_ctx, sizeof with_ctx};
    EXPECT_RV(P11(C_SignInit)(h, &bad, priv), CKR_MECHANISM_PARAM_INVALID);
  }
  /* Only ML-DSA keys take it. */
  CK_MECHANISM ed_gen = {CKM_EC_EDWARDS_KEY_PAIR_GEN, NULL, 0};
  static const uint8_t ed_oid[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
  CK_ATTRIBUTE ed_t[] = {attr(CKA_EC_PARAMS, (void *)ed_oid, sizeof ed_oid)};
  CK_OBJECT_HANDLE epub, epriv;
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &ed_gen, ed_t, 1, NULL, 0, &epub, &epriv), CKR_OK);
  CK_MECHANISM mu_plain = {CKM_ML_DSA_EXTERNAL_MU, NULL, 0};
  EXPECT_RV(P11(C_SignInit)(h, &mu_plain, epriv), CKR_KEY_TYPE_INCONSISTENT);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* Token objects persist encrypted; private ones need a login to be seen or used. */
static void test_persistence(void) {
  current = "persistence";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_MECHANISM gen = {CKM_COMPOSITE_MLDSA65_ED25519, NULL, 0};
  CK_ATTRIBUTE t[] = {attr(CKA_TOKEN, &yes, 1), attr(CKA_LABEL, "comp", 4)};
  CK_OBJECT_HANDLE pub, priv, session_pub, session_priv;
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, t, 2, t, 2, &pub, &priv), CKR_OK);
  EXPECT_RV(P11(C_GenerateKeyPair)(h, &gen, NULL, 0, NULL, 0, &session_pub, &session_priv), CKR_OK);
  uint8_t pk[COMPOSITE_PK_BYTES];
  CK_ATTRIBUTE q[] = {attr(CKA_VALUE, pk, sizeof pk)};
  EXPECT_RV(P11(C_GetAttributeValue)(h, pub, q, 1), CKR_OK);
  /* No key material in the token directory in the clear: the files carry only sealed bytes. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "grep -l '^sealed ' %s/obj-*.db | wc -l | grep -qx 1", tokdir);
  EXPECT(system(cmd) == 0);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  h = open_rw();
  CK_OBJECT_CLASS priv_cls = CKO_PRIVATE_KEY;
  CK_ATTRIBUTE find_priv[] = {attr(CKA_CLASS, &priv_cls, sizeof priv_cls)};
  CK_OBJECT_HANDLE found[8];
  CK_ULONG n = 0;
  EXPECT_RV(P11(C_FindObjectsInit)(h, find_priv, 1), CKR_OK);
  EXPECT_RV(P11(C_FindObjects)(h, found, 8, &n), CKR_OK);
  EXPECT_RV(P11(C_FindObjectsFinal)(h), CKR_OK);
  EXPECT(n == 0); /* private objects are invisible before login */
  EXPECT_RV(P11(C_GetAttributeValue)(h, pub, q, 1), CKR_OK); /* the public key is readable */
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  EXPECT_RV(P11(C_FindObjectsInit)(h, find_priv, 1), CKR_OK);
  EXPECT_RV(P11(C_FindObjects)(h, found, 8, &n), CKR_OK);
  EXPECT_RV(P11(C_FindObjectsFinal)(h), CKR_OK);
  EXPECT(n == 1 && found[0] == priv); /* the session key pair is gone */
  const char *msg = "persisted";
  uint8_t sig[COMPOSITE_SIG_BYTES];
  CK_ULONG sl = sizeof sig;
  CK_MECHANISM m = {CKM_COMPOSITE_MLDSA65_ED25519, NULL, 0};
  EXPECT_RV(P11(C_SignInit)(h, &m, priv), CKR_OK);
  EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)msg, strlen(msg), sig, &sl), CKR_OK);
  EXPECT(sl == COMPOSITE_SIG_BYTES);
  EXPECT(composite_verify(pk, sizeof pk, (const uint8_t *)msg, strlen(msg), NULL, 0, sig, sl) == 1);
  /* Read-only sessions cannot create token objects; destroying removes the file. */
  CK_SESSION_HANDLE ro;
  EXPECT_RV(P11(C_OpenSession)(0, CKF_SERIAL_SESSION, NULL, NULL, &ro), CKR_OK);
  CK_OBJECT_HANDLE a, b;
  EXPECT_RV(P11(C_GenerateKeyPair)(ro, &gen, t, 2, t, 2, &a, &b), CKR_SESSION_READ_ONLY);
  EXPECT_RV(P11(C_DestroyObject)(ro, priv), CKR_SESSION_READ_ONLY);
  EXPECT_RV(P11(C_DestroyObject)(h, priv), CKR_OK);
  EXPECT_RV(P11(C_SignInit)(h, &m, priv), CKR_KEY_HANDLE_INVALID);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* Certificate objects: made in a read-write session, kept across C_Finalize, public (found
 * without a login), destroyed with their file; one without a value is refused. */
static void test_certificates(void) {
  current = "certificates";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_OBJECT_CLASS cls = CKO_CERTIFICATE;
  CK_ULONG x509 = CKC_X_509;
  uint8_t id[4] = {1, 2, 3, 4}, der[2000];
  for (size_t i = 0; i < sizeof der; i++) der[i] = (uint8_t)(i * 7);
  CK_ATTRIBUTE t[] = {attr(CKA_CLASS, &cls, sizeof cls),
                      attr(CKA_CERTIFICATE_TYPE, &x509, sizeof x509),
                      attr(CKA_TOKEN, &yes, 1),
                      attr(CKA_PRIVATE, &no, 1),
                      attr(CKA_ID, id, sizeof id),
                      attr(CKA_LABEL, "cert", 4),
                      attr(CKA_VALUE, der, sizeof der)};
  CK_OBJECT_HANDLE cert, none;
  EXPECT_RV(P11(C_CreateObject)(h, t, 7, &cert), CKR_OK);
  EXPECT_RV(P11(C_CreateObject)(h, t, 6, &none), CKR_TEMPLATE_INCOMPLETE); /* no CKA_VALUE */
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);

  EXPECT_RV(P11(C_Initialize)(NULL), CKR_OK);
  h = open_rw();
  CK_ATTRIBUTE by_id[] = {attr(CKA_CLASS, &cls, sizeof cls), attr(CKA_ID, id, sizeof id)};
  CK_OBJECT_HANDLE found[4];
  CK_ULONG n = 0;
  EXPECT_RV(P11(C_FindObjectsInit)(h, by_id, 2), CKR_OK);
  EXPECT_RV(P11(C_FindObjects)(h, found, 4, &n), CKR_OK);
  EXPECT_RV(P11(C_FindObjectsFinal)(h), CKR_OK);
  EXPECT(n == 1 && found[0] == cert); /* kept, and visible without a login */
  uint8_t back[sizeof der];
  CK_ATTRIBUTE q[] = {attr(CKA_VALUE, back, sizeof back)};
  EXPECT_RV(P11(C_GetAttributeValue)(h, cert, q, 1), CKR_OK);
  EXPECT(q[0].ulValueLen == sizeof der && memcmp(back, der, sizeof der) == 0);
  EXPECT_RV(P11(C_DestroyObject)(h, cert), CKR_OK);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s | grep -q '^obj-'", tokdir);
  EXPECT(system(cmd) != 0); /* its file is gone */
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

/* ---- child processes ------------------------------------------------------------------------------ */

static int child(const char *what) {
  if (P11(C_Initialize)(NULL) != CKR_OK) return 10;
  CK_SESSION_HANDLE h;
  if (P11(C_OpenSession)(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h) != CKR_OK)
    return 11;
  CK_SESSION_INFO si;
  if (P11(C_GetSessionInfo)(h, &si) != CKR_OK) return 12;
  if (strcmp(what, "login-fresh") == 0) {
    if (si.state != CKS_RW_PUBLIC_SESSION) return 13;
    if (P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)) != CKR_OK) return 14;
  } else if (strcmp(what, "expect-locked") == 0) {
    if (P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)) != CKR_PIN_LOCKED) return 15;
  } else {
    return 16;
  }
  return P11(C_Finalize)(NULL) == CKR_OK ? 0 : 17;
}

static void load(const char *path) {
  lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    exit(2);
  }
  CK_RV (*get)(CK_UTF8CHAR *, CK_VERSION *, CK_INTERFACE **, CK_FLAGS) =
      (__typeof__(get))dlsym(lib, "C_GetInterface");
  CK_INTERFACE *it = NULL;
  if (get == NULL || get((CK_UTF8CHAR *)"PKCS 11", NULL, &it, 0) != CKR_OK) {
    fprintf(stderr, "%s: C_GetInterface failed\n", path);
    exit(2);
  }
  T = it->pFunctionList;
}

/* ---- fault injection (src/fault.c) ------------------------------------------------------------ */

/* Replaces tokdir/faults atomically (a new inode, so the module always sees the change). */
static void write_faults(const char *text) {
  char tmp[300], path[300];
  snprintf(tmp, sizeof tmp, "%s/faults.tmp", tokdir);
  snprintf(path, sizeof path, "%s/faults", tokdir);
  FILE *f = fopen(tmp, "w");
  fputs(text, f);
  fclose(f);
  if (rename(tmp, path) != 0) perror("rename faults");
}

/* 64 C_SignInit+C_Sign rounds with HMAC key `k`; bit i of the result is set when round i failed. */
static unsigned long long fault_pattern(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE k) {
  unsigned long long failed = 0;
  CK_MECHANISM m = {CKM_SHA256_HMAC, NULL, 0};
  for (int i = 0; i < 64; i++) {
    uint8_t mac[32];
    CK_ULONG n = sizeof mac;
    CK_RV rv = P11(C_SignInit)(h, &m, k);
    if (rv == CKR_OK) rv = P11(C_Sign)(h, (CK_BYTE *)"m", 1, mac, &n);
    if (rv != CKR_OK) failed |= 1ULL << i;
  }
  return failed;
}

static void test_faults(void) {
  current = "fault injection";
  fresh_token_dir(NULL);
  setup_token();
  CK_SESSION_HANDLE h = open_rw();
  EXPECT_RV(P11(C_Login)(h, CKU_USER, USER_PIN, LEN(USER_PIN)), CKR_OK);
  CK_ULONG len = 32;
  CK_ATTRIBUTE t[] = {attr(CKA_VALUE_LEN, &len, sizeof len), attr(CKA_SIGN, &yes, 1)};
  CK_MECHANISM gen = {CKM_GENERIC_SECRET_KEY_GEN, NULL, 0};
  CK_OBJECT_HANDLE k;
  EXPECT_RV(P11(C_GenerateKey)(h, &gen, t, 2, &k), CKR_OK);
  CK_MECHANISM m = {CKM_SHA256_HMAC, NULL, 0};
  uint8_t mac[32];
  CK_ULONG n = sizeof mac;

  write_faults("# always\nC_SignInit 0x30 1\n");
  EXPECT_RV(P11(C_SignInit)(h, &m, k), CKR_DEVICE_ERROR);
  EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)"m", 1, mac, &n), CKR_OPERATION_NOT_INITIALIZED);

  write_faults("C_Sign 0x5 1\n");
  EXPECT_RV(P11(C_SignInit)(h, &m, k), CKR_OK);
  EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)"m", 1, mac, &n), CKR_GENERAL_ERROR);
  /* The failed call ended the operation: the session is clean for the next one. */
  EXPECT_RV(P11(C_Sign)(h, (CK_BYTE *)"m", 1, mac, &n), CKR_OPERATION_NOT_INITIALIZED);

  write_faults("C_Sign 0x6 0\nbogus line\n");
  EXPECT(fault_pattern(h, k) == 0);

  write_faults("C_Sign 0x6 0.5 7\n");
  unsigned long long a = fault_pattern(h, k);
  write_faults("C_Sign 0x6 0.5 8\n");
  unsigned long long b = fault_pattern(h, k);
  write_faults("C_Sign 0x6 0.5 7\n");
  EXPECT(fault_pattern(h, k) == a); /* the same seed draws the same faults */
  EXPECT(a != 0 && a != ~0ULL && a != b);

  char path[300];
  snprintf(path, sizeof path, "%s/faults", tokdir);
  EXPECT(unlink(path) == 0);
  EXPECT(fault_pattern(h, k) == 0);
  EXPECT_RV(P11(C_CloseSession)(h), CKR_OK);
  EXPECT_RV(P11(C_Finalize)(NULL), CKR_OK);
  remove_token_dir();
}

int main(int argc, char **argv) {
  self_path = argv[0];
  if (argc >= 4 && strcmp(argv[1], "child") == 0) {
    module_path = argv[3];
    load(module_path);
    return child(argv[2]);
  }
  if (argc >= 2) module_path = argv[1];
  load(module_path);
  test_interface();
  test_config_errors();
  test_uninitialised_token();
  test_login();
  test_lockout();
  test_session_limits();
  test_fork();
  test_concurrent_calls();
  test_mldsa_keys();
  test_external_mu();
  test_hidden_mechanisms();
  test_persistence();
  test_certificates();
  test_faults();
  if (failures) {
    fprintf(stderr, "p11_test: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("p11_test: all %d checks passed\n", checks);
  return 0;
}
