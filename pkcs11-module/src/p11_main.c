/* Library, slot, token, session and login functions, the function tables and the interfaces.
 * One slot per configured endpoint, each with one token: the keys its /token lists. No PKCS#11
 * session crosses the wire: a session here is local state, and every signature is one request. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pkcs11_interfaces.h"
#include "p11_ops.h"
#include "state.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(CK_TOKEN_INFO) == 208, "CK_TOKEN_INFO layout");
_Static_assert(sizeof(CK_INFO) == 88, "CK_INFO layout");
_Static_assert(sizeof(CK_SLOT_INFO) == 112, "CK_SLOT_INFO layout");
_Static_assert(sizeof(CK_C_INITIALIZE_ARGS) == 48, "CK_C_INITIALIZE_ARGS layout");
_Static_assert(sizeof(CK_INTERFACE) == 24, "CK_INTERFACE layout");
_Static_assert(sizeof(CK_FUNCTION_LIST_3_2) == 840, "3.2 table is 840 bytes");

module_state g = {.life = PTHREAD_RWLOCK_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const MANUFACTURER = "svcd project";

long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void pad(CK_UTF8CHAR *dst, size_t n, const char *src) {
  memset(dst, ' ', n);
  size_t l = strlen(src);
  memcpy(dst, src, l < n ? l : n);
}

/* ---- life: every call holds `life` for reading; C_Initialize/C_Finalize for writing ---------- */

/* A child forked from an initialised parent: its inherited locks may be held by threads that do
 * not exist in it. They are made fresh here; the state stays marked as the parent's. */
static void atfork_child(void) {
  pthread_rwlock_t fresh_life = PTHREAD_RWLOCK_INITIALIZER;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g.life, &fresh_life, sizeof fresh_life);
  memcpy(&g.lock, &fresh, sizeof fresh);
  for (unsigned i = 0; i < g.nslots; i++) memcpy(&g.slots[i].lock, &fresh, sizeof fresh);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

CK_RV enter(void) {
  pthread_rwlock_rdlock(&g.life);
  if (!g.initialized || g.pid != getpid()) {
    pthread_rwlock_unlock(&g.life);
    return CKR_CRYPTOKI_NOT_INITIALIZED;
  }
  return CKR_OK;
}

void leave(void) { pthread_rwlock_unlock(&g.life); }

static CK_RV check_init_args(CK_VOID_PTR p) {
  if (p == NULL) return CKR_OK;
  const CK_C_INITIALIZE_ARGS *a = p;
  if (a->pReserved != NULL) return CKR_ARGUMENTS_BAD;
  int any = a->CreateMutex != NULL, all = any && a->DestroyMutex && a->LockMutex && a->UnlockMutex;
  if (any && !all) return CKR_ARGUMENTS_BAD;
  if (any && !(a->flags & CKF_OS_LOCKING_OK)) return CKR_CANT_LOCK; /* only the OS's locks */
  return CKR_OK;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;
/* Never undone: curl_global_cleanup is not safe while the host program uses libcurl itself. */
static void curl_init(void) { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

static CK_RV slots_create(const client_config *cfg) {
  g.slots = calloc(cfg->count, sizeof *g.slots);
  if (g.slots == NULL) return CKR_HOST_MEMORY;
  g.nslots = cfg->count;
  for (unsigned i = 0; i < cfg->count; i++) {
    slot_t *s = &g.slots[i];
    s->cfg = cfg->ep[i];
    pthread_mutex_init(&s->lock, NULL);
    s->http = http_pool_new(&s->cfg);
    if (s->http == NULL) return CKR_HOST_MEMORY;
  }
  return CKR_OK;
}

static void slots_free(int abandon) {
  for (unsigned i = 0; i < g.nslots; i++) {
    slot_t *s = &g.slots[i];
    http_pool_free(s->http, abandon);
    for (size_t k = 0; k < s->nkeys; k++) key_free(s->keys[k]);
    for (size_t k = 0; k < s->nretired; k++) key_free(s->retired[k]);
    free(s->keys);
    free(s->retired);
  }
  free(g.slots);
  g.slots = NULL;
  g.nslots = 0;
}

EXPORT CK_RV C_Initialize(CK_VOID_PTR pInitArgs) {
  CK_RV rv = check_init_args(pInitArgs);
  if (rv != CKR_OK) return rv;
  pthread_once(&atfork_once, install_atfork);
  pthread_rwlock_wrlock(&g.life);
  if (g.initialized) {
    /* A child forked from an initialised parent inherits the state; initialising again there is
     * not a legal move (as on the test module): it must C_Finalize first. */
    rv = getpid() != g.pid ? CKR_FUNCTION_FAILED : CKR_CRYPTOKI_ALREADY_INITIALIZED;
    pthread_rwlock_unlock(&g.life);
    return rv;
  }
  debug_init();
  pthread_once(&curl_once, curl_init);
  client_config cfg;
  char why[256] = "";
  if (curl_init_result != CURLE_OK) {
    rv = CKR_GENERAL_ERROR;
    snprintf(why, sizeof why, "libcurl did not initialise");
  } else {
    rv = config_load(&cfg, why, sizeof why);
  }
  if (rv == CKR_OK) rv = slots_create(&cfg);
  if (rv == CKR_OK) {
    g.initialized = 1;
    g.pid = getpid();
    g.sessions = NULL;
    g.next_handle = 1;
    g.logged_in = 0;
    debug_log("initialised: %u endpoint(s), first %s", g.nslots, g.slots[0].cfg.url);
  } else {
    debug_log("C_Initialize: %s", why);
    slots_free(0);
  }
  pthread_rwlock_unlock(&g.life);
  return rv;
}

static void sessions_free(void) {
  for (session_t *s = g.sessions, *next; s != NULL; s = next) {
    next = s->next;
    session_free(s);
  }
  g.sessions = NULL;
}

EXPORT CK_RV C_Finalize(CK_VOID_PTR pReserved) {
  if (pReserved != NULL) return CKR_ARGUMENTS_BAD;
  pthread_rwlock_wrlock(&g.life);
  if (!g.initialized) {
    pthread_rwlock_unlock(&g.life);
    return CKR_CRYPTOKI_NOT_INITIALIZED;
  }
  /* In a forked child the connections are the parent's: dropped here, never closed (a TLS close
   * would end the parent's session). */
  int child = getpid() != g.pid;
  sessions_free();
  slots_free(child);
  g.initialized = 0;
  g.logged_in = 0;
  pthread_rwlock_unlock(&g.life);
  return CKR_OK;
}

EXPORT CK_RV C_GetInfo(CK_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  memset(pInfo, 0, sizeof *pInfo);
  pInfo->cryptokiVersion = (CK_VERSION){3, 2};
  pad(pInfo->manufacturerID, 32, MANUFACTURER);
  pad(pInfo->libraryDescription, 32, "svcd remote signing client");
  pInfo->libraryVersion = (CK_VERSION){1, 0};
  leave();
  return CKR_OK;
}

/* ---- slots and tokens -------------------------------------------------------------------------- */

slot_t *slot_by_id(CK_SLOT_ID id) { return id < g.nslots ? &g.slots[id] : NULL; }

static int same_key(const remote_key *a, const remote_key *b) {
  return a->type == b->type && a->raw_len == b->raw_len && memcmp(a->raw, b->raw, a->raw_len) == 0;
}

static int append_key(remote_key ***arr, size_t *n, remote_key *k) {
  remote_key **grown = realloc(*arr, (*n + 1) * sizeof *grown);
  if (grown == NULL) return -1;
  grown[(*n)++] = k;
  *arr = grown;
  return 0;
}

/* Merges a fresh listing: a label keeps its index (and so its handles); a replaced key is retired,
 * not freed, since an operation may still hold it; a label no longer listed is marked gone. */
static CK_RV slot_merge(slot_t *s, token_listing *fresh) {
  for (size_t i = 0; i < s->nkeys; i++) s->keys[i]->gone = 1;
  for (size_t j = 0; j < fresh->count; j++) {
    remote_key *k = fresh->keys[j];
    if (s->cfg.key_types != 0 && !(s->cfg.key_types & (1u << k->type))) continue;
    fresh->keys[j] = NULL;
    size_t i = 0;
    while (i < s->nkeys && strcmp(s->keys[i]->label, k->label) != 0) i++;
    if (i < s->nkeys && same_key(s->keys[i], k)) {
      s->keys[i]->digests = k->digests;
      s->keys[i]->gone = 0;
      key_free(k);
    } else if (i < s->nkeys) {
      if (append_key(&s->retired, &s->nretired, s->keys[i]) != 0) return CKR_HOST_MEMORY;
      s->keys[i] = k;
    } else if (append_key(&s->keys, &s->nkeys, k) != 0) {
      key_free(k);
      return CKR_HOST_MEMORY;
    }
  }
  snprintf(s->token_label, sizeof s->token_label, "%s", fresh->token_label);
  snprintf(s->serial, sizeof s->serial, "%s", fresh->serial);
  s->has_digests_field = fresh->has_digests_field;
  __atomic_store_n(&s->stated_max_body, fresh->max_body, __ATOMIC_RELAXED);
  return CKR_OK;
}

/* GET /token, when never fetched or older than `max_age_ms` (-1: only when never fetched). A failed
 * refresh keeps a listing fetched before. */
CK_RV slot_refresh(slot_t *s, long max_age_ms) {
  pthread_mutex_lock(&s->lock);
  int fresh_enough = s->fetched_at != 0 && (max_age_ms < 0 || now_ms() - s->fetched_at < max_age_ms);
  int had = s->fetched_at != 0;
  pthread_mutex_unlock(&s->lock);
  if (fresh_enough) return CKR_OK;
  http_answer a;
  CK_RV rv = http_call(s->http, "GET", "/token", NULL, NULL, 0, &a);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "token");
  token_listing t = {0};
  if (rv == CKR_OK) rv = token_parse((const char *)a.body, a.len, &t);
  http_answer_free(&a);
  pthread_mutex_lock(&s->lock);
  if (rv == CKR_OK) {
    rv = slot_merge(s, &t);
    s->fetched_at = now_ms();
  }
  pthread_mutex_unlock(&s->lock);
  token_listing_free(&t);
  if (rv != CKR_OK && had) {
    debug_log("GET /token failed (0x%lx): keeping the keys listed before", rv);
    return CKR_OK;
  }
  return rv;
}

/* A view of the slot's keys for the mechanism functions (taken under the slot's lock). */
token_listing slot_view(slot_t *s) {
  token_listing t = {.keys = s->keys, .count = s->nkeys};
  return t;
}

EXPORT CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID *pSlotList, CK_ULONG *pulCount) {
  (void)tokenPresent; /* every slot has its token: the remote one */
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  if (pSlotList != NULL && *pulCount < g.nslots)
    rv = CKR_BUFFER_TOO_SMALL;
  else if (pSlotList != NULL)
    for (unsigned i = 0; i < g.nslots; i++) pSlotList[i] = i;
  *pulCount = g.nslots;
  leave();
  return rv;
}

EXPORT CK_RV C_GetSlotInfo(CK_SLOT_ID slotID, CK_SLOT_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  slot_t *s = slot_by_id(slotID);
  if (s == NULL) {
    leave();
    return CKR_SLOT_ID_INVALID;
  }
  memset(pInfo, 0, sizeof *pInfo);
  pad(pInfo->slotDescription, 64, s->cfg.url);
  pad(pInfo->manufacturerID, 32, MANUFACTURER);
  pInfo->flags = CKF_TOKEN_PRESENT;
  pInfo->hardwareVersion = pInfo->firmwareVersion = (CK_VERSION){1, 0};
  leave();
  return CKR_OK;
}

EXPORT CK_RV C_GetTokenInfo(CK_SLOT_ID slotID, CK_TOKEN_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  slot_t *s = slot_by_id(slotID);
  rv = s == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(s, -1);
  if (rv != CKR_OK) {
    leave();
    return rv;
  }
  memset(pInfo, 0, sizeof *pInfo);
  pthread_mutex_lock(&s->lock);
  pad(pInfo->label, 32, s->cfg.label[0] ? s->cfg.label : s->token_label[0] ? s->token_label : "svcd");
  pad(pInfo->serialNumber, 16, s->serial);
  pthread_mutex_unlock(&s->lock);
  pad(pInfo->manufacturerID, 32, MANUFACTURER);
  pad(pInfo->model, 16, "svcd remote");
  /* No CKF_LOGIN_REQUIRED: the TLS client certificate is the credential, and no PIN exists. */
  pInfo->flags = CKF_TOKEN_INITIALIZED | CKF_USER_PIN_INITIALIZED;
  pInfo->ulMaxSessionCount = pInfo->ulMaxRwSessionCount = CK_EFFECTIVELY_INFINITE;
  pInfo->ulSessionCount = pInfo->ulRwSessionCount = CK_UNAVAILABLE_INFORMATION;
  pInfo->ulMaxPinLen = 255;
  pInfo->ulMinPinLen = 0;
  pInfo->ulTotalPublicMemory = pInfo->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
  pInfo->ulTotalPrivateMemory = pInfo->ulFreePrivateMemory = CK_UNAVAILABLE_INFORMATION;
  pInfo->hardwareVersion = pInfo->firmwareVersion = (CK_VERSION){1, 0};
  memset(pInfo->utcTime, ' ', sizeof pInfo->utcTime);
  leave();
  return CKR_OK;
}

EXPORT CK_RV C_GetMechanismList(CK_SLOT_ID slotID, CK_MECHANISM_TYPE *pList, CK_ULONG *pulCount) {
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  slot_t *s = slot_by_id(slotID);
  rv = s == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(s, -1);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&s->lock);
    token_listing view = slot_view(s);
    size_t n = mech_list(&view, pList, pList != NULL ? *pulCount : 0);
    pthread_mutex_unlock(&s->lock);
    if (pList != NULL && n > *pulCount) rv = CKR_BUFFER_TOO_SMALL;
    *pulCount = n;
  }
  leave();
  return rv;
}

EXPORT CK_RV C_GetMechanismInfo(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  slot_t *s = slot_by_id(slotID);
  rv = s == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(s, -1);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&s->lock);
    token_listing view = slot_view(s);
    rv = mech_info(&view, type, pInfo);
    pthread_mutex_unlock(&s->lock);
  }
  leave();
  return rv;
}

/* ---- sessions ---------------------------------------------------------------------------------- */

static session_t *session_find(CK_SESSION_HANDLE h) {
  for (session_t *s = g.sessions; s != NULL; s = s->next)
    if (s->handle == h) return s;
  return NULL;
}

CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out) {
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  session_t *s = session_find(h);
  if (s == NULL)
    rv = CKR_SESSION_HANDLE_INVALID;
  else if (s->busy)
    rv = CKR_OPERATION_ACTIVE; /* another thread is inside a call on this handle */
  else
    s->busy = 1;
  pthread_mutex_unlock(&g.lock);
  if (rv != CKR_OK) leave();
  *out = rv == CKR_OK ? s : NULL;
  return rv;
}

void session_leave(session_t *s) {
  pthread_mutex_lock(&g.lock);
  s->busy = 0;
  pthread_mutex_unlock(&g.lock);
  leave();
}

EXPORT CK_RV C_OpenSession(CK_SLOT_ID slotID, CK_FLAGS flags, CK_VOID_PTR pApplication,
                           CK_VOID_PTR Notify, CK_SESSION_HANDLE *phSession) {
  (void)pApplication, (void)Notify;
  if (phSession == NULL) return CKR_ARGUMENTS_BAD;
  if (!(flags & CKF_SERIAL_SESSION)) return CKR_SESSION_PARALLEL_NOT_SUPPORTED;
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  slot_t *slot = slot_by_id(slotID);
  rv = slot == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(slot, SVCP11_TOKEN_TTL_MS);
  session_t *s = NULL;
  if (rv == CKR_OK && (s = calloc(1, sizeof *s)) == NULL) rv = CKR_HOST_MEMORY;
  if (rv == CKR_OK) {
    s->slot = (unsigned)slotID;
    s->flags = flags;
    pthread_mutex_lock(&g.lock);
    s->handle = g.next_handle++;
    s->next = g.sessions;
    g.sessions = s;
    pthread_mutex_unlock(&g.lock);
    *phSession = s->handle;
  }
  leave();
  return rv;
}

static CK_RV close_where(int (*match)(session_t *, CK_ULONG), CK_ULONG arg) {
  pthread_mutex_lock(&g.lock);
  CK_RV rv = CKR_OK;
  for (session_t *s = g.sessions; s != NULL; s = s->next)
    if (match(s, arg) && s->busy) rv = CKR_OPERATION_ACTIVE;
  for (session_t **pp = &g.sessions; rv == CKR_OK && *pp != NULL;) {
    session_t *s = *pp;
    if (!match(s, arg)) {
      pp = &s->next;
      continue;
    }
    *pp = s->next;
    session_free(s);
  }
  if (g.sessions == NULL) g.logged_in = 0; /* closing the last session logs out */
  pthread_mutex_unlock(&g.lock);
  return rv;
}

static int by_handle(session_t *s, CK_ULONG h) { return s->handle == h; }
static int by_slot(session_t *s, CK_ULONG slot) { return s->slot == slot; }

EXPORT CK_RV C_CloseSession(CK_SESSION_HANDLE hSession) {
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  int known = session_find(hSession) != NULL;
  pthread_mutex_unlock(&g.lock);
  rv = known ? close_where(by_handle, hSession) : CKR_SESSION_HANDLE_INVALID;
  leave();
  return rv;
}

EXPORT CK_RV C_CloseAllSessions(CK_SLOT_ID slotID) {
  CK_RV rv = enter();
  if (rv != CKR_OK) return rv;
  rv = slot_by_id(slotID) == NULL ? CKR_SLOT_ID_INVALID : close_where(by_slot, slotID);
  leave();
  return rv;
}

EXPORT CK_RV C_GetSessionInfo(CK_SESSION_HANDLE hSession, CK_SESSION_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  int rw = (s->flags & CKF_RW_SESSION) != 0;
  pInfo->slotID = s->slot;
  pInfo->flags = s->flags & (CKF_RW_SESSION | CKF_SERIAL_SESSION);
  pInfo->ulDeviceError = 0;
  pInfo->state = g.logged_in ? (rw ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS)
                             : (rw ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION);
  session_leave(s);
  return CKR_OK;
}

/* No PIN exists (the client certificate is the credential). A login with any PIN succeeds and
 * proves nothing, for the tools that log in before they sign; a second one answers
 * CKR_USER_ALREADY_LOGGED_IN, as on the daemon's own module. */
EXPORT CK_RV C_Login(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType, CK_UTF8CHAR *pPin,
                     CK_ULONG ulPinLen) {
  (void)pPin, (void)ulPinLen;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  if (userType == CKU_CONTEXT_SPECIFIC)
    rv = CKR_OK; /* no key needs it (CKA_ALWAYS_AUTHENTICATE is false), harmless */
  else if (userType != CKU_USER)
    rv = CKR_USER_TYPE_INVALID;
  else if (g.logged_in)
    rv = CKR_USER_ALREADY_LOGGED_IN;
  else
    g.logged_in = 1;
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_Logout(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  rv = g.logged_in ? CKR_OK : CKR_USER_NOT_LOGGED_IN;
  g.logged_in = 0;
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}

/* ---- function tables and interfaces ------------------------------------------------------------ */

static CK_RV not_supported(void) { return CKR_FUNCTION_NOT_SUPPORTED; }

#define ENTRY(name) [IDX_##name] = (CK_ANY_FN)name
CK_RV C_GetFunctionList(CK_FUNCTION_LIST_3_2 **ppFunctionList);
CK_RV C_GetInterfaceList(CK_INTERFACE *pList, CK_ULONG *pulCount);
CK_RV C_GetInterface(CK_UTF8CHAR *pName, CK_VERSION *pVersion, CK_INTERFACE **ppInterface,
                     CK_FLAGS flags);

static CK_FUNCTION_LIST_3_2 table_3_2 = {
    {3, 2},
    {ENTRY(C_Initialize), ENTRY(C_Finalize), ENTRY(C_GetInfo), ENTRY(C_GetFunctionList),
     ENTRY(C_GetSlotList), ENTRY(C_GetSlotInfo), ENTRY(C_GetTokenInfo), ENTRY(C_GetMechanismList),
     ENTRY(C_GetMechanismInfo), ENTRY(C_OpenSession), ENTRY(C_CloseSession),
     ENTRY(C_CloseAllSessions), ENTRY(C_GetSessionInfo), ENTRY(C_Login), ENTRY(C_Logout),
     ENTRY(C_GetAttributeValue), ENTRY(C_FindObjectsInit), ENTRY(C_FindObjects),
     ENTRY(C_FindObjectsFinal), ENTRY(C_SignInit), ENTRY(C_Sign), ENTRY(C_SignUpdate),
     ENTRY(C_SignFinal), ENTRY(C_VerifyInit), ENTRY(C_Verify), ENTRY(C_VerifyUpdate),
     ENTRY(C_VerifyFinal), ENTRY(C_GetInterfaceList), ENTRY(C_GetInterface)}};
static CK_FUNCTION_LIST_3_2 table_3_0, table_2_40;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void fill_tables(void) {
  pkcs11_fill_tables(&table_3_2, &table_3_0, &table_2_40, (CK_ANY_FN)not_supported);
}

/* No CKF_INTERFACE_FORK_SAFE: a forked child must finalise and initialise again. */
static CK_INTERFACE interfaces[3] = {
    {(CK_UTF8CHAR *)"PKCS 11", &table_3_2, 0},
    {(CK_UTF8CHAR *)"PKCS 11", &table_3_0, 0},
    {(CK_UTF8CHAR *)"PKCS 11", &table_2_40, 0},
};
#define NINTERFACES (sizeof interfaces / sizeof interfaces[0])

/* C_GetFunctionList hands out the table whose version says 2.40, so an application that knows only
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
