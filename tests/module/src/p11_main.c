/* General, slot/token, session and login functions, the function tables and the interfaces.
 * Emulated behaviours of the hardware module svcmod stands in for (README.md beside the Makefile):
 * per-process login, PBKDF2 with 200 000 iterations at every login, lockout after five failures
 * (persisted), a session cap, a secure heap with a 24 KiB reservation per session,
 * CKR_FUNCTION_FAILED for C_Initialize in a forked child, and CKR_OPERATION_ACTIVE for a second
 * concurrent call on one session. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crypto.h"
#include "pkcs11_interfaces.h"
#include "svcmod.h"

#define EXPORT __attribute__((visibility("default")))

module_state g = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER, .role = -1};

_Static_assert(sizeof(struct op_ops) <= SVCMOD_SESSION_RESERVE, "ops fit the reservation");
_Static_assert(sizeof(CK_TOKEN_INFO) == 208, "CK_TOKEN_INFO layout");
_Static_assert(sizeof(CK_INFO) == 88, "CK_INFO layout");
_Static_assert(sizeof(CK_SLOT_INFO) == 112, "CK_SLOT_INFO layout");
_Static_assert(sizeof(CK_C_INITIALIZE_ARGS) == 48, "CK_C_INITIALIZE_ARGS layout");
_Static_assert(sizeof(CK_SIGN_ADDITIONAL_CONTEXT) == 24, "CK_SIGN_ADDITIONAL_CONTEXT layout");
_Static_assert(sizeof(CK_INTERFACE) == 24, "CK_INTERFACE layout");
_Static_assert(sizeof(CK_FUNCTION_LIST_3_2) == 840, "3.2 table is 840 bytes");

static const char *const MANUFACTURER = "svcd project";
static const char *const PIN_AAD_USER = "svcmod-user-pin";
static const char *const PIN_AAD_SO = "svcmod-so-pin";

CK_RV module_ready(void) { return g.initialized ? CKR_OK : CKR_CRYPTOKI_NOT_INITIALIZED; }

/* ---- secure heap: one 24 KiB reservation per session ------------------------------------------- */

static CK_RV heap_map(void) {
  g.heap_bytes = (size_t)g.cfg.secure_heap_kb * 1024;
  void *p = mmap(NULL, g.heap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CKR_HOST_MEMORY;
  /* Locked and kept out of core dumps where the system allows it; RLIMIT_MEMLOCK may refuse the
   * lock for large heaps, which changes nothing about the accounting. */
  (void)mlock(p, g.heap_bytes);
  (void)madvise(p, g.heap_bytes, MADV_DONTDUMP);
  g.heap = p;
  g.heap_chunks = (unsigned)(g.heap_bytes / SVCMOD_SESSION_RESERVE);
  if (g.heap_chunks > sizeof g.chunk_used) g.heap_chunks = sizeof g.chunk_used;
  memset(g.chunk_used, 0, sizeof g.chunk_used);
  return CKR_OK;
}

static void heap_unmap(void) {
  if (g.heap == NULL) return;
  OPENSSL_cleanse(g.heap, g.heap_bytes);
  munlock(g.heap, g.heap_bytes);
  munmap(g.heap, g.heap_bytes);
  g.heap = NULL;
}

static int chunk_alloc(void) {
  for (unsigned i = 0; i < g.heap_chunks; i++) {
    if (!g.chunk_used[i]) {
      g.chunk_used[i] = 1;
      memset(g.heap + (size_t)i * SVCMOD_SESSION_RESERVE, 0, SVCMOD_SESSION_RESERVE);
      return (int)i;
    }
  }
  return -1;
}

static void chunk_release(unsigned i) {
  OPENSSL_cleanse(g.heap + (size_t)i * SVCMOD_SESSION_RESERVE, SVCMOD_SESSION_RESERVE);
  g.chunk_used[i] = 0;
}

/* ---- sessions -------------------------------------------------------------------------------- */

static session_t *session_find(CK_SESSION_HANDLE h) {
  if (h == CK_INVALID_HANDLE) return NULL;
  for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
    if (g.sessions[i].used && g.sessions[i].handle == h) return &g.sessions[i];
  return NULL;
}

/* Test hook: a file named `removed` in the token directory pulls the token out, so the daemon's
 * handling of a dead token (CKR_DEVICE_REMOVED on a pooled session) can be tested. */
static int token_removed(void) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/removed", g.cfg.tokendir);
  return access(path, F_OK) == 0;
}

CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out) {
  pthread_mutex_lock(&g.lock);
  CK_RV rv = CKR_OK;
  session_t *s = NULL;
  if (!g.initialized)
    rv = CKR_CRYPTOKI_NOT_INITIALIZED;
  else if (token_removed())
    rv = CKR_DEVICE_REMOVED;
  else if ((s = session_find(h)) == NULL)
    rv = CKR_SESSION_HANDLE_INVALID;
  else if (s->busy)
    rv = CKR_OPERATION_ACTIVE; /* another thread is inside a call on this handle */
  else
    s->busy = 1;
  pthread_mutex_unlock(&g.lock);
  *out = rv == CKR_OK ? s : NULL;
  return rv;
}

void session_leave(session_t *s) {
  pthread_mutex_lock(&g.lock);
  s->busy = 0;
  pthread_cond_broadcast(&g.idle);
  pthread_mutex_unlock(&g.lock);
}

void op_end(op_t *op) {
  free(op->data);
  OPENSSL_cleanse(op, sizeof *op);
}

/* Logs the process out: key material of token objects is dropped, private session objects go. */
static void logout_locked(void) {
  for (object_t *o = g.objects, *next; o; o = next) {
    next = o->next;
    if (!o->on_token && o->is_private)
      object_unlink_free(o);
    else
      object_lock(o);
  }
  OPENSSL_cleanse(g.master, sizeof g.master);
  g.role = -1;
}

static void session_close_locked(session_t *s) {
  for (object_t *o = g.objects, *next; o; o = next) {
    next = o->next;
    if (!o->on_token && o->owner == s->handle) object_unlink_free(o);
  }
  free(s->found);
  s->found = NULL;
  if (s->digest) EVP_MD_CTX_free(s->digest);
  s->digest = NULL;
  if (s->ops) {
    free(s->ops->sign.data);
    free(s->ops->verify.data);
  }
  chunk_release(s->chunk);
  s->ops = NULL;
  s->used = 0;
  s->handle = CK_INVALID_HANDLE;
  g.nsessions--;
  if (g.nsessions == 0 && g.role != -1) logout_locked();
}

static void wait_idle_locked(void) {
  for (;;) {
    int busy = 0;
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++) busy |= g.sessions[i].used && g.sessions[i].busy;
    if (!busy) return;
    pthread_cond_wait(&g.idle, &g.lock);
  }
}

static void close_all_locked(void) {
  wait_idle_locked();
  for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
    if (g.sessions[i].used) session_close_locked(&g.sessions[i]);
}

/* ---- general ----------------------------------------------------------------------------------- */

static CK_RV check_init_args(const CK_C_INITIALIZE_ARGS *a) {
  if (a == NULL) return CKR_OK;
  if (a->pReserved != NULL) return CKR_ARGUMENTS_BAD;
  int n = (a->CreateMutex != NULL) + (a->DestroyMutex != NULL) + (a->LockMutex != NULL) +
          (a->UnlockMutex != NULL);
  if (n != 0 && n != 4) return CKR_ARGUMENTS_BAD;
  /* Only the OS's own locking is used; callbacks without CKF_OS_LOCKING_OK cannot be honoured. */
  if (n == 4 && !(a->flags & CKF_OS_LOCKING_OK)) return CKR_CANT_LOCK;
  return CKR_OK;
}

EXPORT CK_RV C_Initialize(CK_VOID_PTR pInitArgs) {
  CK_RV rv = check_init_args(pInitArgs);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  if (g.initialized) {
    /* A child forked from an initialised parent inherits the state; initialising again there is
     * not a legal move, as on the hardware module. */
    rv = getpid() != g.pid ? CKR_FUNCTION_FAILED : CKR_CRYPTOKI_ALREADY_INITIALIZED;
    pthread_mutex_unlock(&g.lock);
    return rv;
  }
  rv = config_load(&g.cfg);
  if (rv == CKR_OK) rv = heap_map();
  if (rv == CKR_OK) {
    int fd = store_lock();
    rv = fd < 0 ? CKR_GENERAL_ERROR : store_read_token(&g.tok);
    store_unlock(fd);
    if (rv != CKR_OK) heap_unmap();
  }
  if (rv == CKR_OK) {
    g.role = -1;
    g.objects = NULL;
    g.nsessions = 0;
    memset(g.sessions, 0, sizeof g.sessions);
    g.next_session_object = 0x40000000UL;
    g.next_session_handle = 1;
    memset(&g.dir_mtime, 0, sizeof g.dir_mtime);
    g.pid = getpid();
    g.initialized = 1;
  }
  pthread_mutex_unlock(&g.lock);
  return rv;
}

EXPORT CK_RV C_Finalize(CK_VOID_PTR pReserved) {
  if (pReserved != NULL) return CKR_ARGUMENTS_BAD;
  pthread_mutex_lock(&g.lock);
  if (!g.initialized) {
    pthread_mutex_unlock(&g.lock);
    return CKR_CRYPTOKI_NOT_INITIALIZED;
  }
  close_all_locked();
  while (g.objects) object_unlink_free(g.objects);
  OPENSSL_cleanse(g.master, sizeof g.master);
  g.role = -1;
  heap_unmap();
  g.initialized = 0;
  pthread_mutex_unlock(&g.lock);
  return CKR_OK;
}

EXPORT CK_RV C_GetInfo(CK_INFO *pInfo) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  memset(pInfo, 0, sizeof *pInfo);
  pInfo->cryptokiVersion = (CK_VERSION){3, 2};
  pad_copy(pInfo->manufacturerID, 32, MANUFACTURER);
  pad_copy(pInfo->libraryDescription, 32, "svcmod PKCS#11 test module");
  pInfo->libraryVersion = (CK_VERSION){1, 0};
  return CKR_OK;
}

/* ---- slot and token ---------------------------------------------------------------------------- */

EXPORT CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID *pSlotList, CK_ULONG *pulCount) {
  (void)tokenPresent;
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  if (pSlotList == NULL) {
    *pulCount = 1;
    return CKR_OK;
  }
  if (*pulCount < 1) {
    *pulCount = 1;
    return CKR_BUFFER_TOO_SMALL;
  }
  pSlotList[0] = 0;
  *pulCount = 1;
  return CKR_OK;
}

EXPORT CK_RV C_GetSlotInfo(CK_SLOT_ID slotID, CK_SLOT_INFO *pInfo) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  memset(pInfo, 0, sizeof *pInfo);
  pad_copy(pInfo->slotDescription, 64, "svcmod slot 0");
  pad_copy(pInfo->manufacturerID, 32, MANUFACTURER);
  pInfo->flags = CKF_TOKEN_PRESENT;
  pInfo->hardwareVersion = (CK_VERSION){1, 0};
  pInfo->firmwareVersion = (CK_VERSION){1, 0};
  return CKR_OK;
}

static CK_FLAGS pin_flags(unsigned fails, CK_FLAGS low, CK_FLAGS final, CK_FLAGS locked) {
  if (fails >= SVCMOD_MAX_FAILED_LOGINS) return locked;
  if (fails == SVCMOD_MAX_FAILED_LOGINS - 1) return final | low;
  return fails > 0 ? low : 0;
}

/* Reads token.db again: counters and initialisation may have been changed by another process. */
static CK_RV token_reload_locked(void) {
  int fd = store_lock();
  if (fd < 0) return CKR_DEVICE_ERROR;
  token_state t;
  CK_RV rv = store_read_token(&t);
  store_unlock(fd);
  if (rv == CKR_OK) g.tok = t;
  OPENSSL_cleanse(&t, sizeof t);
  return rv;
}

EXPORT CK_RV C_GetTokenInfo(CK_SLOT_ID slotID, CK_TOKEN_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  pthread_mutex_lock(&g.lock);
  CK_RV rv = !g.initialized ? CKR_CRYPTOKI_NOT_INITIALIZED
             : slotID != 0  ? CKR_SLOT_ID_INVALID
                            : token_reload_locked();
  if (rv == CKR_OK) {
    memset(pInfo, 0, sizeof *pInfo);
    if (g.tok.initialized)
      memcpy(pInfo->label, g.tok.label, 32);
    else
      memset(pInfo->label, ' ', 32);
    pad_copy(pInfo->manufacturerID, 32, MANUFACTURER);
    pad_copy(pInfo->model, 16, "svcmod");
    if (g.tok.initialized)
      memcpy(pInfo->serialNumber, g.tok.serial, 16);
    else
      memset(pInfo->serialNumber, ' ', 16);
    pInfo->flags = CKF_RNG | CKF_LOGIN_REQUIRED | CKF_RESTORE_KEY_NOT_NEEDED;
    if (g.tok.initialized) pInfo->flags |= CKF_TOKEN_INITIALIZED;
    if (g.tok.user_set) pInfo->flags |= CKF_USER_PIN_INITIALIZED;
    pInfo->flags |= pin_flags(g.tok.user_fails, CKF_USER_PIN_COUNT_LOW, CKF_USER_PIN_FINAL_TRY,
                              CKF_USER_PIN_LOCKED);
    pInfo->flags |= pin_flags(g.tok.so_fails, CKF_SO_PIN_COUNT_LOW, CKF_SO_PIN_FINAL_TRY,
                              CKF_SO_PIN_LOCKED);
    CK_ULONG rw = 0;
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
      rw += g.sessions[i].used && (g.sessions[i].flags & CKF_RW_SESSION);
    pInfo->ulMaxSessionCount = g.cfg.session_cap;
    pInfo->ulSessionCount = g.nsessions;
    pInfo->ulMaxRwSessionCount = g.cfg.session_cap;
    pInfo->ulRwSessionCount = rw;
    pInfo->ulMaxPinLen = SVCMOD_MAX_PIN;
    pInfo->ulMinPinLen = SVCMOD_MIN_PIN;
    pInfo->ulTotalPublicMemory = CK_UNAVAILABLE_INFORMATION;
    pInfo->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
    pInfo->ulTotalPrivateMemory = g.heap_bytes;
    CK_ULONG used = 0;
    for (unsigned i = 0; i < g.heap_chunks; i++) used += g.chunk_used[i];
    pInfo->ulFreePrivateMemory = g.heap_bytes - used * SVCMOD_SESSION_RESERVE;
    pInfo->hardwareVersion = (CK_VERSION){1, 0};
    pInfo->firmwareVersion = (CK_VERSION){1, 0};
    memset(pInfo->utcTime, ' ', 16);
  }
  pthread_mutex_unlock(&g.lock);
  return rv;
}

static const struct {
  CK_MECHANISM_TYPE type;
  CK_MECHANISM_INFO info;
} MECHANISMS[] = {
    {CKM_ML_DSA_KEY_PAIR_GEN, {0, 0, CKF_GENERATE_KEY_PAIR}},
    {CKM_ML_DSA, {0, 0, CKF_SIGN | CKF_VERIFY}},
    {CKM_ML_DSA_EXTERNAL_MU, {0, 0, CKF_SIGN | CKF_VERIFY}},
    {CKM_COMPOSITE_MLDSA65_ED25519, {0, 0, CKF_GENERATE_KEY_PAIR | CKF_SIGN | CKF_VERIFY}},
    {CKM_EC_EDWARDS_KEY_PAIR_GEN, {256, 256, CKF_GENERATE_KEY_PAIR}},
    {CKM_EDDSA, {256, 256, CKF_SIGN | CKF_VERIFY}},
    {CKM_EC_KEY_PAIR_GEN,
     {256, 256, CKF_GENERATE_KEY_PAIR | CKF_EC_F_P | CKF_EC_OID | CKF_EC_UNCOMPRESS}},
    {CKM_ECDSA, {256, 256, CKF_SIGN | CKF_VERIFY | CKF_EC_F_P | CKF_EC_OID | CKF_EC_UNCOMPRESS}},
    {CKM_ECDSA_SHA256,
     {256, 256, CKF_SIGN | CKF_VERIFY | CKF_EC_F_P | CKF_EC_OID | CKF_EC_UNCOMPRESS}},
    {CKM_SHA256_HMAC, {1, 1024, CKF_SIGN | CKF_VERIFY}},
    {CKM_GENERIC_SECRET_KEY_GEN, {8, 8192, CKF_GENERATE}},
    {CKM_SHA256, {0, 0, CKF_DIGEST}},
    {CKM_SHA384, {0, 0, CKF_DIGEST}},
    {CKM_SHA512, {0, 0, CKF_DIGEST}},
};
#define NMECH (sizeof MECHANISMS / sizeof MECHANISMS[0])

EXPORT CK_RV C_GetMechanismList(CK_SLOT_ID slotID, CK_MECHANISM_TYPE *pList, CK_ULONG *pulCount) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  CK_ULONG shown = 0;
  for (size_t i = 0; i < NMECH; i++) shown += !config_hides(&g.cfg, MECHANISMS[i].type);
  if (pList == NULL) {
    *pulCount = shown;
    return CKR_OK;
  }
  if (*pulCount < shown) {
    *pulCount = shown;
    return CKR_BUFFER_TOO_SMALL;
  }
  CK_ULONG n = 0;
  for (size_t i = 0; i < NMECH; i++)
    if (!config_hides(&g.cfg, MECHANISMS[i].type)) pList[n++] = MECHANISMS[i].type;
  *pulCount = n;
  return CKR_OK;
}

EXPORT CK_RV C_GetMechanismInfo(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type,
                                CK_MECHANISM_INFO *pInfo) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  if (config_hides(&g.cfg, type)) return CKR_MECHANISM_INVALID;
  for (size_t i = 0; i < NMECH; i++) {
    if (MECHANISMS[i].type == type) {
      *pInfo = MECHANISMS[i].info;
      return CKR_OK;
    }
  }
  return CKR_MECHANISM_INVALID;
}

/* ---- PINs ---------------------------------------------------------------------------------------- */

static int pin_len_ok(CK_ULONG len) { return len >= SVCMOD_MIN_PIN && len <= SVCMOD_MAX_PIN; }

/* The slow part of every login: PBKDF2-HMAC-SHA256, 200 000 iterations, then the GCM tag of the
 * sealed master key decides whether the PIN was right. Runs without the module lock. */
static int pin_unwrap(const CK_UTF8CHAR *pin, CK_ULONG len, const uint8_t salt[16],
                      const uint8_t wrap[SVCMOD_WRAP_BYTES], const char *aad, uint8_t master[32]) {
  uint8_t key[32];
  int ok = pbkdf2_sha256(pin, len, salt, SVCMOD_SALT_BYTES, SVCMOD_PBKDF2_ITERATIONS, key) == 0 &&
           unseal(key, (const uint8_t *)aad, strlen(aad), wrap, SVCMOD_WRAP_BYTES, master) == 0;
  OPENSSL_cleanse(key, sizeof key);
  return ok;
}

static CK_RV pin_wrap(const CK_UTF8CHAR *pin, CK_ULONG len, const uint8_t master[32],
                      const char *aad, uint8_t salt[16], uint8_t wrap[SVCMOD_WRAP_BYTES]) {
  uint8_t key[32];
  CK_RV rv = random_bytes(salt, SVCMOD_SALT_BYTES) == 0 &&
                     pbkdf2_sha256(pin, len, salt, SVCMOD_SALT_BYTES, SVCMOD_PBKDF2_ITERATIONS,
                                   key) == 0 &&
                     seal(key, (const uint8_t *)aad, strlen(aad), master, 32, wrap) == 0
                 ? CKR_OK
                 : CKR_FUNCTION_FAILED;
  OPENSSL_cleanse(key, sizeof key);
  return rv;
}

/* Records a login attempt in token.db under the cross-process lock. Returns the failure count
 * after the update, or -1 when the file could not be written. */
static int record_attempt(CK_USER_TYPE who, int success, token_state *fresh) {
  int fd = store_lock();
  if (fd < 0) return -1;
  int fails = -1;
  if (store_read_token(fresh) == CKR_OK && fresh->initialized) {
    unsigned *counter = who == CKU_SO ? &fresh->so_fails : &fresh->user_fails;
    unsigned before = *counter;
    *counter = success ? 0 : before + 1;
    if (*counter == before || store_write_token(fresh) == CKR_OK) fails = (int)*counter;
  }
  store_unlock(fd);
  return fails;
}

/* Verifies a PIN of `who` against the current token.db, counting the attempt. On success the
 * master key is in `master`. */
static CK_RV check_pin(CK_USER_TYPE who, const CK_UTF8CHAR *pin, CK_ULONG len, uint8_t master[32],
                       token_state *fresh) {
  token_state t;
  int fd = store_lock();
  CK_RV rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
  store_unlock(fd);
  if (rv != CKR_OK) return rv;
  if (!t.initialized) return CKR_TOKEN_NOT_INITIALIZED;
  if (who == CKU_USER && !t.user_set) return CKR_USER_PIN_NOT_INITIALIZED;
  unsigned fails = who == CKU_SO ? t.so_fails : t.user_fails;
  if (fails >= SVCMOD_MAX_FAILED_LOGINS) return CKR_PIN_LOCKED;
  int ok = who == CKU_SO ? pin_unwrap(pin, len, t.so_salt, t.so_wrap, PIN_AAD_SO, master)
                         : pin_unwrap(pin, len, t.user_salt, t.user_wrap, PIN_AAD_USER, master);
  OPENSSL_cleanse(&t, sizeof t);
  int after = record_attempt(who, ok, fresh);
  if (after < 0) return CKR_DEVICE_ERROR;
  return ok ? CKR_OK : CKR_PIN_INCORRECT;
}

EXPORT CK_RV C_InitToken(CK_SLOT_ID slotID, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen,
                         CK_UTF8CHAR *pLabel) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pPin == NULL || pLabel == NULL) return CKR_ARGUMENTS_BAD;
  if (!pin_len_ok(ulPinLen)) return CKR_PIN_LEN_RANGE;
  pthread_mutex_lock(&g.lock);
  CK_RV rv = g.nsessions > 0 ? CKR_SESSION_EXISTS : token_reload_locked();
  token_state t = g.tok;
  pthread_mutex_unlock(&g.lock);
  if (rv != CKR_OK) return rv;

  uint8_t master[32];
  if (t.initialized) {
    token_state fresh;
    rv = check_pin(CKU_SO, pPin, ulPinLen, master, &fresh);
    OPENSSL_cleanse(&fresh, sizeof fresh);
    if (rv != CKR_OK) return rv;
  }
  /* A fresh master key: whatever was sealed under the old one is gone with the objects. */
  token_state nt;
  memset(&nt, 0, sizeof nt);
  if (random_bytes(master, 32) != 0) return CKR_FUNCTION_FAILED;
  rv = pin_wrap(pPin, ulPinLen, master, PIN_AAD_SO, nt.so_salt, nt.so_wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv != CKR_OK) return rv;
  nt.initialized = 1;
  memcpy(nt.label, pLabel, 32);
  if (t.initialized) {
    memcpy(nt.serial, t.serial, 16);
  } else {
    uint8_t r[8];
    random_bytes(r, sizeof r);
    char hex[17];
    hex_encode(hex, r, 8);
    memcpy(nt.serial, hex, 16);
  }
  nt.next_id = t.next_id ? t.next_id : 1;

  pthread_mutex_lock(&g.lock);
  int fd = store_lock();
  if (fd < 0) rv = CKR_DEVICE_ERROR;
  if (rv == CKR_OK) {
    token_state cur;
    if (store_read_token(&cur) == CKR_OK && cur.next_id > nt.next_id) nt.next_id = cur.next_id;
    rv = store_wipe_objects();
    if (rv == CKR_OK) rv = store_write_token(&nt);
  }
  store_unlock(fd);
  if (rv == CKR_OK) {
    for (object_t *o = g.objects, *next; o; o = next) {
      next = o->next;
      if (o->on_token) object_unlink_free(o);
    }
    g.tok = nt;
  }
  pthread_mutex_unlock(&g.lock);
  OPENSSL_cleanse(&nt, sizeof nt);
  return rv;
}

EXPORT CK_RV C_InitPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  uint8_t master[32];
  pthread_mutex_lock(&g.lock);
  if (g.role != (long)CKU_SO || !(s->flags & CKF_RW_SESSION))
    rv = CKR_USER_NOT_LOGGED_IN;
  else if (pPin == NULL)
    rv = CKR_ARGUMENTS_BAD;
  else if (!pin_len_ok(ulPinLen))
    rv = CKR_PIN_LEN_RANGE;
  memcpy(master, g.master, 32);
  pthread_mutex_unlock(&g.lock);
  uint8_t salt[16], wrap[SVCMOD_WRAP_BYTES];
  if (rv == CKR_OK) rv = pin_wrap(pPin, ulPinLen, master, PIN_AAD_USER, salt, wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    int fd = store_lock();
    token_state t;
    rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
    if (rv == CKR_OK) {
      t.user_set = 1;
      t.user_fails = 0;
      memcpy(t.user_salt, salt, 16);
      memcpy(t.user_wrap, wrap, sizeof wrap);
      rv = store_write_token(&t);
      if (rv == CKR_OK) g.tok = t;
      OPENSSL_cleanse(&t, sizeof t);
    }
    store_unlock(fd);
    pthread_mutex_unlock(&g.lock);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_SetPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pOldPin, CK_ULONG ulOldLen,
                      CK_UTF8CHAR *pNewPin, CK_ULONG ulNewLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  CK_USER_TYPE who = g.role == (long)CKU_SO ? CKU_SO : CKU_USER;
  if (!(s->flags & CKF_RW_SESSION))
    rv = CKR_SESSION_READ_ONLY;
  else if (pOldPin == NULL || pNewPin == NULL)
    rv = CKR_ARGUMENTS_BAD;
  else if (!pin_len_ok(ulNewLen))
    rv = CKR_PIN_LEN_RANGE;
  pthread_mutex_unlock(&g.lock);
  uint8_t master[32], salt[16], wrap[SVCMOD_WRAP_BYTES];
  token_state fresh;
  if (rv == CKR_OK) rv = check_pin(who, pOldPin, ulOldLen, master, &fresh);
  if (rv == CKR_OK)
    rv = pin_wrap(pNewPin, ulNewLen, master, who == CKU_SO ? PIN_AAD_SO : PIN_AAD_USER, salt, wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    int fd = store_lock();
    token_state t;
    rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
    if (rv == CKR_OK) {
      memcpy(who == CKU_SO ? t.so_salt : t.user_salt, salt, 16);
      memcpy(who == CKU_SO ? t.so_wrap : t.user_wrap, wrap, sizeof wrap);
      rv = store_write_token(&t);
      if (rv == CKR_OK) g.tok = t;
      OPENSSL_cleanse(&t, sizeof t);
    }
    store_unlock(fd);
    pthread_mutex_unlock(&g.lock);
  }
  OPENSSL_cleanse(&fresh, sizeof fresh);
  session_leave(s);
  return rv;
}

/* ---- sessions ---------------------------------------------------------------------------------- */

EXPORT CK_RV C_OpenSession(CK_SLOT_ID slotID, CK_FLAGS flags, CK_VOID_PTR pApplication,
                           CK_VOID_PTR Notify, CK_SESSION_HANDLE *phSession) {
  (void)pApplication;
  (void)Notify;
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (phSession == NULL) return CKR_ARGUMENTS_BAD;
  if (!(flags & CKF_SERIAL_SESSION)) return CKR_SESSION_PARALLEL_NOT_SUPPORTED;
  pthread_mutex_lock(&g.lock);
  CK_RV rv = token_reload_locked();
  if (rv == CKR_OK && !g.tok.initialized) rv = CKR_TOKEN_NOT_INITIALIZED;
  if (rv == CKR_OK && g.role == (long)CKU_SO && !(flags & CKF_RW_SESSION))
    rv = CKR_SESSION_READ_WRITE_SO_EXISTS;
  /* The hardware module answers CKR_HOST_MEMORY both past its session cap and when its secure heap
   * has no room for another session's reservation. */
  if (rv == CKR_OK && g.nsessions >= g.cfg.session_cap) rv = CKR_HOST_MEMORY;
  session_t *s = NULL;
  if (rv == CKR_OK) {
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS && s == NULL; i++)
      if (!g.sessions[i].used && !g.sessions[i].busy) s = &g.sessions[i];
    if (s == NULL) rv = CKR_HOST_MEMORY;
  }
  int chunk = -1;
  if (rv == CKR_OK && (chunk = chunk_alloc()) < 0) rv = CKR_HOST_MEMORY;
  if (rv == CKR_OK) {
    memset(s, 0, sizeof *s);
    s->used = 1;
    s->handle = g.next_session_handle++;
    s->flags = flags & (CKF_SERIAL_SESSION | CKF_RW_SESSION);
    s->chunk = (unsigned)chunk;
    s->ops = (struct op_ops *)(void *)(g.heap + (size_t)chunk * SVCMOD_SESSION_RESERVE);
    g.nsessions++;
    *phSession = s->handle;
  }
  pthread_mutex_unlock(&g.lock);
  return rv;
}

EXPORT CK_RV C_CloseSession(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  session_close_locked(s);
  s->busy = 0;
  pthread_cond_broadcast(&g.idle);
  pthread_mutex_unlock(&g.lock);
  return CKR_OK;
}

EXPORT CK_RV C_CloseAllSessions(CK_SLOT_ID slotID) {
  pthread_mutex_lock(&g.lock);
  CK_RV rv = !g.initialized ? CKR_CRYPTOKI_NOT_INITIALIZED
             : slotID != 0  ? CKR_SLOT_ID_INVALID
                            : CKR_OK;
  if (rv == CKR_OK) close_all_locked();
  pthread_mutex_unlock(&g.lock);
  return rv;
}

EXPORT CK_RV C_GetSessionInfo(CK_SESSION_HANDLE hSession, CK_SESSION_INFO *pInfo) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (pInfo == NULL) {
    session_leave(s);
    return CKR_ARGUMENTS_BAD;
  }
  pthread_mutex_lock(&g.lock);
  int rw = (s->flags & CKF_RW_SESSION) != 0;
  pInfo->slotID = 0;
  pInfo->flags = s->flags;
  pInfo->ulDeviceError = 0;
  if (g.role == (long)CKU_SO)
    pInfo->state = CKS_RW_SO_FUNCTIONS;
  else if (g.role == (long)CKU_USER)
    pInfo->state = rw ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS;
  else
    pInfo->state = rw ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION;
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return CKR_OK;
}

/* ---- login ---------------------------------------------------------------------------------- */

static CK_RV login(session_t *s, CK_USER_TYPE who, const CK_UTF8CHAR *pin, CK_ULONG len) {
  (void)s;
  if (who == CKU_CONTEXT_SPECIFIC) return CKR_OPERATION_NOT_INITIALIZED; /* no such keys here */
  if (who != CKU_USER && who != CKU_SO) return CKR_USER_TYPE_INVALID;
  if (pin == NULL) return CKR_ARGUMENTS_BAD; /* no protected authentication path */
  pthread_mutex_lock(&g.lock);
  CK_RV rv = CKR_OK;
  if (g.role == (long)who)
    rv = CKR_USER_ALREADY_LOGGED_IN;
  else if (g.role != -1)
    rv = CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
  else if (who == CKU_SO)
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
      if (g.sessions[i].used && !(g.sessions[i].flags & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY_EXISTS;
  pthread_mutex_unlock(&g.lock);
  if (rv != CKR_OK) return rv;

  uint8_t master[32];
  token_state fresh;
  rv = check_pin(who, pin, len, master, &fresh);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    if (g.role != -1) {
      /* another thread of this process won the race while the PIN was being derived */
      rv = g.role == (long)who ? CKR_USER_ALREADY_LOGGED_IN : CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
    } else {
      g.role = (long)who;
      g.tok = fresh;
      memcpy(g.master, master, 32);
      if (who == CKU_USER) {
        store_refresh(1);
        for (object_t *o = g.objects; o; o = o->next) object_unlock(o);
      }
    }
    pthread_mutex_unlock(&g.lock);
  }
  OPENSSL_cleanse(master, sizeof master);
  OPENSSL_cleanse(&fresh, sizeof fresh);
  return rv;
}

EXPORT CK_RV C_Login(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType, CK_UTF8CHAR *pPin,
                     CK_ULONG ulPinLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = login(s, userType, pPin, ulPinLen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_Logout(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  if (g.role == -1)
    rv = CKR_USER_NOT_LOGGED_IN;
  else
    logout_locked();
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}

/* ---- function tables and interfaces ------------------------------------------------------------ */

/* Every entry the module does not implement. Called through a table entry with whatever
 * arguments the caller passes, which it ignores. */
static CK_RV not_supported(void) { return CKR_FUNCTION_NOT_SUPPORTED; }

/* Implemented entries; the rest stay NULL here and become not_supported in fill_tables(). */
#define ENTRY(name) [IDX_##name] = (CK_ANY_FN)name
CK_RV C_GetFunctionList(CK_FUNCTION_LIST_3_2 **ppFunctionList);
CK_RV C_GetInterfaceList(CK_INTERFACE *pList, CK_ULONG *pulCount);
CK_RV C_GetInterface(CK_UTF8CHAR *pName, CK_VERSION *pVersion, CK_INTERFACE **ppInterface,
                     CK_FLAGS flags);
#include "p11_ops.h"

static CK_FUNCTION_LIST_3_2 table_3_2 = {
    {3, 2},
    {ENTRY(C_Initialize), ENTRY(C_Finalize), ENTRY(C_GetInfo), ENTRY(C_GetFunctionList),
     ENTRY(C_GetSlotList), ENTRY(C_GetSlotInfo), ENTRY(C_GetTokenInfo), ENTRY(C_GetMechanismList),
     ENTRY(C_GetMechanismInfo), ENTRY(C_InitToken), ENTRY(C_InitPIN), ENTRY(C_SetPIN),
     ENTRY(C_OpenSession), ENTRY(C_CloseSession), ENTRY(C_CloseAllSessions),
     ENTRY(C_GetSessionInfo), ENTRY(C_Login), ENTRY(C_Logout), ENTRY(C_CreateObject),
     ENTRY(C_DestroyObject), ENTRY(C_GetAttributeValue), ENTRY(C_FindObjectsInit),
     ENTRY(C_FindObjects), ENTRY(C_FindObjectsFinal), ENTRY(C_DigestInit), ENTRY(C_Digest),
     ENTRY(C_DigestUpdate), ENTRY(C_DigestFinal), ENTRY(C_SignInit), ENTRY(C_Sign),
     ENTRY(C_SignUpdate), ENTRY(C_SignFinal), ENTRY(C_VerifyInit), ENTRY(C_Verify),
     ENTRY(C_VerifyUpdate), ENTRY(C_VerifyFinal), ENTRY(C_GenerateKey), ENTRY(C_GenerateKeyPair),
     ENTRY(C_SeedRandom), ENTRY(C_GenerateRandom), ENTRY(C_GetInterfaceList),
     ENTRY(C_GetInterface), ENTRY(C_VerifySignatureInit), ENTRY(C_VerifySignature),
     ENTRY(C_VerifySignatureUpdate), ENTRY(C_VerifySignatureFinal)}};
static CK_FUNCTION_LIST_3_2 table_3_0, table_2_40;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void fill_tables(void) {
  pkcs11_fill_tables(&table_3_2, &table_3_0, &table_2_40, (CK_ANY_FN)not_supported);
}

static CK_INTERFACE interfaces[2] = {
    {(CK_UTF8CHAR *)"PKCS 11", &table_3_2, 0},
    {(CK_UTF8CHAR *)"PKCS 11", &table_3_0, 0},
};
#define NINTERFACES (sizeof interfaces / sizeof interfaces[0])

/* C_GetFunctionList hands out a table whose version says 2.40, so an application that only knows
 * C_GetFunctionList never reads past the 68 entries it expects; C_GetInterface gives 3.2. */
EXPORT CK_RV C_GetFunctionList(CK_FUNCTION_LIST_3_2 **ppFunctionList) {
  if (ppFunctionList == NULL) return CKR_ARGUMENTS_BAD;
  pthread_once(&tables_once, fill_tables);
  *ppFunctionList = &table_2_40;
  return CKR_OK;
}

EXPORT CK_RV C_GetInterfaceList(CK_INTERFACE *pList, CK_ULONG *pulCount) {
  pthread_once(&tables_once, fill_tables);
  return pkcs11_interface_list(interfaces, NINTERFACES, pList, pulCount);
}

EXPORT CK_RV C_GetInterface(CK_UTF8CHAR *pName, CK_VERSION *pVersion, CK_INTERFACE **ppInterface,
                            CK_FLAGS flags) {
  pthread_once(&tables_once, fill_tables);
  return pkcs11_find_interface(interfaces, NINTERFACES, pName, pVersion, ppInterface, flags);
}
