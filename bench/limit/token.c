/* The token: loading the module, the login, finding keys, session copies of them, and signing. */
#include "token.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

CK_FUNCTION_LIST_3_2 *p11;
static CK_SLOT_ID slot;
typedef CK_RV (*copy_object_fn)(CK_SESSION_HANDLE, CK_OBJECT_HANDLE, CK_ATTRIBUTE *, CK_ULONG,
                                CK_OBJECT_HANDLE *);

/* DER of the P-256 curve's OID, as CKA_EC_PARAMS holds it. */
static const unsigned char P256_PARAMS[] = {0x06, 0x08, 0x2a, 0x86, 0x48,
                                            0xce, 0x3d, 0x03, 0x01, 0x07};

static void check_rv(const char *what, CK_RV rv) {
  if (rv != CKR_OK) die("%s failed: 0x%lx", what, (unsigned long)rv);
}

void load_module(void) {
  void *lib = dlopen(opt.module, RTLD_NOW | RTLD_LOCAL);
  if (!lib) die("cannot load %s: %s", opt.module, dlerror());
  CK_RV (*get)(CK_FUNCTION_LIST_3_2 **) =
      (CK_RV(*)(CK_FUNCTION_LIST_3_2 **))dlsym(lib, "C_GetFunctionList");
  if (!get) die("%s has no C_GetFunctionList", opt.module);
  check_rv("C_GetFunctionList", get(&p11));
  CK_C_INITIALIZE_ARGS args = {.flags = CKF_OS_LOCKING_OK};
  check_rv("C_Initialize", P11(C_Initialize)(&args));
}

/* The slot whose token has --token as its label (blank padded to 32). */
void find_slot(void) {
  CK_SLOT_ID slots[64];
  CK_ULONG n = 64;
  check_rv("C_GetSlotList", P11(C_GetSlotList)(CK_TRUE, slots, &n));
  char want[32];
  size_t len = strlen(opt.token);
  if (len > sizeof want) die("--token is longer than 32 bytes");
  memset(want, ' ', sizeof want);
  memcpy(want, opt.token, len);
  for (CK_ULONG i = 0; i < n; i++) {
    CK_TOKEN_INFO info;
    if (P11(C_GetTokenInfo)(slots[i], &info) == CKR_OK && !memcmp(info.label, want, sizeof want)) {
      slot = slots[i];
      return;
    }
  }
  die("no token labelled %s", opt.token);
}

CK_SESSION_HANDLE open_session(void) {
  CK_SESSION_HANDLE s;
  check_rv("C_OpenSession",
           P11(C_OpenSession)(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s));
  return s;
}

/* One C_Login with the PIN file's bytes (one trailing newline removed), zeroed when it returns. */
void login(CK_SESSION_HANDLE s) {
  unsigned char pin[256];
  int fd = open(opt.pin_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open the PIN file %s", opt.pin_file);
  ssize_t n = read(fd, pin, sizeof pin);
  close(fd);
  if (n <= 0 || n == (ssize_t)sizeof pin) die("the PIN file %s is empty or too long", opt.pin_file);
  if (pin[n - 1] == '\n') pin[--n] = 0;
  CK_RV rv = P11(C_Login)(s, CKU_USER, pin, (CK_ULONG)n);
  explicit_bzero(pin, sizeof pin);
  if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) {
    die("C_Login failed: 0x%lx", (unsigned long)rv);
  }
}

/* The token object of class `cls` labelled `label`, or CK_INVALID_HANDLE. */
CK_OBJECT_HANDLE find_object(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label) {
  CK_BBOOL yes = CK_TRUE;
  CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof cls},
                      {CKA_TOKEN, &yes, sizeof yes},
                      {CKA_LABEL, (void *)label, strlen(label)}};
  CK_OBJECT_HANDLE h[2];
  CK_ULONG n = 0;
  if (P11(C_FindObjectsInit)(s, t, 3) != CKR_OK) return CK_INVALID_HANDLE;
  CK_RV rv = P11(C_FindObjects)(s, h, 2, &n);
  P11(C_FindObjectsFinal)(s);
  return rv == CKR_OK && n == 1 ? h[0] : CK_INVALID_HANDLE;
}

/* C_SignInit + C_Sign; the signature's length, or 0. */
size_t token_sign(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE mech, CK_OBJECT_HANDLE key,
                  const unsigned char *data, size_t len, unsigned char *out, size_t cap) {
  CK_MECHANISM m = {mech, NULL, 0};
  if (P11(C_SignInit)(s, &m, key) != CKR_OK) return 0;
  CK_ULONG n = cap;
  if (P11(C_Sign)(s, (CK_BYTE *)data, len, out, &n) != CKR_OK) return 0;
  return n;
}

/* The session copy of the EC P-256 key `label` (CKA_TOKEN false), made at its first use. */
CK_OBJECT_HANDLE key_copy(struct worker *w, const char *label, size_t len) {
  for (int i = 0; i < w->nkeys; i++) {
    if (strlen(w->keys[i].label) == len && !memcmp(w->keys[i].label, label, len)) {
      return w->keys[i].copy;
    }
  }
  if (len >= sizeof w->keys[0].label || w->nkeys == 16) return CK_INVALID_HANDLE;
  char name[256];
  memcpy(name, label, len);
  name[len] = 0;
  CK_OBJECT_HANDLE key = find_object(w->session, CKO_PRIVATE_KEY, name);
  if (!key) return CK_INVALID_HANDLE;
  CK_KEY_TYPE type = 0;
  unsigned char params[64];
  CK_ATTRIBUTE a[] = {{CKA_KEY_TYPE, &type, sizeof type}, {CKA_EC_PARAMS, params, sizeof params}};
  if (P11(C_GetAttributeValue)(w->session, key, a, 2) != CKR_OK || type != CKK_EC ||
      a[1].ulValueLen != sizeof P256_PARAMS || memcmp(params, P256_PARAMS, sizeof P256_PARAMS)) {
    return CK_INVALID_HANDLE;
  }
  CK_BBOOL no = CK_FALSE;
  CK_ATTRIBUTE t[] = {{CKA_TOKEN, &no, sizeof no}};
  CK_OBJECT_HANDLE copy;
  if (((copy_object_fn)p11->fn[IDX_C_CopyObject])(w->session, key, t, 1, &copy) != CKR_OK) {
    return CK_INVALID_HANDLE;
  }
  memcpy(w->keys[w->nkeys].label, name, len + 1);
  w->keys[w->nkeys++].copy = copy;
  return copy;
}
