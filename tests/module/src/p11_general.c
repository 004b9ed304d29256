/* General purpose, slot and token functions: C_Initialize, C_Finalize, C_GetInfo, C_GetSlotList,
 * C_GetSlotInfo, C_GetTokenInfo, C_GetMechanismList, C_GetMechanismInfo.
 * Emulated behaviours of the hardware module svcmod stands in for (README.md beside the Makefile):
 * per-process login, PBKDF2 with 200 000 iterations at every login, lockout after five failures
 * (persisted), a session cap, a secure heap with a 24 KiB reservation per session,
 * CKR_FUNCTION_FAILED for C_Initialize in a forked child, and CKR_OPERATION_ACTIVE for a second
 * concurrent call on one session. */
#include <openssl/crypto.h>
#include <string.h>
#include <unistd.h>

#include "pkcs11_functions.h"
#include "pkcs11_padded.h"
#include "svcmod.h"

_Static_assert(sizeof(struct op_ops) <= SVCMOD_SESSION_RESERVE, "ops fit the reservation");
_Static_assert(sizeof(CK_TOKEN_INFO) == 208, "CK_TOKEN_INFO layout");
_Static_assert(sizeof(CK_INFO) == 88, "CK_INFO layout");
_Static_assert(sizeof(CK_SLOT_INFO) == 112, "CK_SLOT_INFO layout");
_Static_assert(sizeof(CK_C_INITIALIZE_ARGS) == 48, "CK_C_INITIALIZE_ARGS layout");
_Static_assert(sizeof(CK_SIGN_ADDITIONAL_CONTEXT) == 24, "CK_SIGN_ADDITIONAL_CONTEXT layout");
_Static_assert(sizeof(CK_INTERFACE) == 24, "CK_INTERFACE layout");
_Static_assert(sizeof(CK_FUNCTION_LIST_3_2) == 840, "3.2 table is 840 bytes");

static const char *const MANUFACTURER = "svcd project";

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

CK_RV C_Initialize(CK_VOID_PTR pInitArgs) {
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

CK_RV C_Finalize(CK_VOID_PTR pReserved) {
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

CK_RV C_GetInfo(CK_INFO *pInfo) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  memset(pInfo, 0, sizeof *pInfo);
  pInfo->cryptokiVersion = (CK_VERSION){3, 2};
  pkcs11_pad(pInfo->manufacturerID, 32, MANUFACTURER);
  pkcs11_pad(pInfo->libraryDescription, 32, "svcmod PKCS#11 test module");
  pInfo->libraryVersion = (CK_VERSION){1, 0};
  return CKR_OK;
}

/* ---- slot and token ---------------------------------------------------------------------------- */

CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID *pSlotList, CK_ULONG *pulCount) {
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

CK_RV C_GetSlotInfo(CK_SLOT_ID slotID, CK_SLOT_INFO *pInfo) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  memset(pInfo, 0, sizeof *pInfo);
  pkcs11_pad(pInfo->slotDescription, 64, "svcmod slot 0");
  pkcs11_pad(pInfo->manufacturerID, 32, MANUFACTURER);
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

CK_RV C_GetTokenInfo(CK_SLOT_ID slotID, CK_TOKEN_INFO *pInfo) {
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
    pkcs11_pad(pInfo->manufacturerID, 32, MANUFACTURER);
    pkcs11_pad(pInfo->model, 16, "svcmod");
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

CK_RV C_GetMechanismList(CK_SLOT_ID slotID, CK_MECHANISM_TYPE *pList, CK_ULONG *pulCount) {
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

CK_RV C_GetMechanismInfo(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type,
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
