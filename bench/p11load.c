/*
 * A PKCS#11 signing load from C, for bench/compare.ts: T threads, each with its own session, sign a
 * 32-byte digest with CKM_ECDSA (C_SignInit + C_Sign) for S seconds (or N signatures each), and
 * print one JSON line: signatures, wall seconds, signatures/s and this process's CPU µs per
 * signature. The module is any PKCS#11 library: SoftHSM2 itself, or p11-kit-client.so talking to
 * `p11-kit server` (P11_KIT_SERVER_ADDRESS), which is what "p11-kit remote" means in the bench.
 *
 * Usage: p11load MODULE TOKEN-LABEL PIN-FILE KEY-LABEL THREADS SECONDS [COUNT] [copy]
 *   COUNT > 0: each thread signs COUNT times instead of for SECONDS.
 *   copy: (else "token") sign with a session copy of the key (C_CopyObject, CKA_TOKEN=false) instead of the
 *         token object, to compare what SoftHSM's C_SignInit costs for each.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <p11-kit/pkcs11.h>

static CK_FUNCTION_LIST_PTR p11;
static CK_SLOT_ID slot;
static CK_OBJECT_HANDLE key;
static double seconds;
static long count;
static atomic_long total;
static atomic_int failed;

static void die(const char *what, CK_RV rv) {
  fprintf(stderr, "p11load: %s failed: 0x%lx\n", what, (unsigned long)rv);
  exit(1);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static void *signer(void *arg) {
  (void)arg;
  CK_SESSION_HANDLE s;
  CK_RV rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s);
  if (rv != CKR_OK) die("C_OpenSession", rv);
  CK_MECHANISM mech = {CKM_ECDSA, NULL, 0};
  unsigned char digest[32], sig[132];
  memset(digest, 7, sizeof digest);
  long n = 0;
  double end = now() + seconds;
  while (count > 0 ? n < count : now() < end) {
    CK_ULONG len = sizeof sig;
    rv = p11->C_SignInit(s, &mech, key);
    if (rv == CKR_OK) rv = p11->C_Sign(s, digest, sizeof digest, sig, &len);
    if (rv != CKR_OK) {
      fprintf(stderr, "p11load: signing failed: 0x%lx\n", (unsigned long)rv);
      atomic_store(&failed, 1);
      break;
    }
    n++;
  }
  atomic_fetch_add(&total, n);
  p11->C_CloseSession(s);
  return NULL;
}

static CK_SLOT_ID find_slot(const char *label) {
  CK_SLOT_ID slots[64];
  CK_ULONG n = 64;
  CK_RV rv = p11->C_GetSlotList(CK_TRUE, slots, &n);
  if (rv != CKR_OK) die("C_GetSlotList", rv);
  for (CK_ULONG i = 0; i < n; i++) {
    CK_TOKEN_INFO info;
    if (p11->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
    size_t len = strlen(label);
    if (len <= 32 && memcmp(info.label, label, len) == 0) {
      int padded = 1;
      for (size_t j = len; j < 32; j++) padded &= info.label[j] == ' ';
      if (padded) return slots[i];
    }
  }
  fprintf(stderr, "p11load: no token labelled '%s'\n", label);
  exit(1);
}

static CK_OBJECT_HANDLE find_key(CK_SESSION_HANDLE s, const char *label) {
  CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
  CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls}, {CKA_LABEL, (void *)label, strlen(label)}};
  CK_OBJECT_HANDLE h;
  CK_ULONG n = 0;
  CK_RV rv = p11->C_FindObjectsInit(s, t, 2);
  if (rv != CKR_OK) die("C_FindObjectsInit", rv);
  rv = p11->C_FindObjects(s, &h, 1, &n);
  p11->C_FindObjectsFinal(s);
  if (rv != CKR_OK || n != 1) {
    fprintf(stderr, "p11load: no private key labelled '%s'\n", label);
    exit(1);
  }
  return h;
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: p11load MODULE TOKEN PIN-FILE KEY THREADS SECONDS [COUNT] [copy]\n");
    return 2;
  }
  int threads = atoi(argv[5]);
  seconds = atof(argv[6]);
  count = argc > 7 ? atol(argv[7]) : 0;
  int copy = argc > 8 && strcmp(argv[8], "copy") == 0;
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "p11load: %s\n", dlerror());
    return 1;
  }
  CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(lib, "C_GetFunctionList");
  if (!get) die("dlsym C_GetFunctionList", 0);
  CK_RV rv = get(&p11);
  if (rv != CKR_OK) die("C_GetFunctionList", rv);
  CK_C_INITIALIZE_ARGS init = {0};
  init.flags = CKF_OS_LOCKING_OK;
  rv = p11->C_Initialize(&init);
  if (rv != CKR_OK) die("C_Initialize", rv);
  slot = find_slot(argv[2]);

  char pin[256];
  FILE *f = fopen(argv[3], "rb");
  if (!f) {
    perror("p11load: PIN file");
    return 1;
  }
  size_t pinLen = fread(pin, 1, sizeof pin, f);
  fclose(f);
  while (pinLen > 0 && (pin[pinLen - 1] == '\n' || pin[pinLen - 1] == '\r')) pinLen--;
  CK_SESSION_HANDLE s;
  rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s);
  if (rv != CKR_OK) die("C_OpenSession", rv);
  rv = p11->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, pinLen);
  memset(pin, 0, sizeof pin);
  if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) die("C_Login", rv);
  key = find_key(s, argv[4]);
  if (copy) {
    CK_BBOOL no = CK_FALSE;
    CK_ATTRIBUTE t[] = {{CKA_TOKEN, &no, sizeof no}};
    CK_OBJECT_HANDLE c;
    rv = p11->C_CopyObject(s, key, t, 1, &c);
    if (rv != CKR_OK) die("C_CopyObject", rv);
    key = c;
  }

  pthread_t ids[256];
  if (threads < 1 || threads > 256) threads = 1;
  double cpu0 = cpu(), t0 = now();
  for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, signer, NULL);
  for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
  double wall = now() - t0, used = cpu() - cpu0;
  long n = atomic_load(&total);
  printf("{\"signatures\":%ld,\"seconds\":%.3f,\"perSecond\":%.1f,\"cpuUsPerSignature\":%.2f}\n", n,
         wall, n / wall, n > 0 ? used * 1e6 / n : 0.0);
  p11->C_CloseSession(s);
  p11->C_Finalize(NULL);
  return atomic_load(&failed) ? 1 : 0;
}
