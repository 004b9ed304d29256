#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "life.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* what follows */
static session_t *sessions;
static CK_SESSION_HANDLE next_handle = 1;
static int logged_in;

static session_t *session_find(CK_SESSION_HANDLE h) {
  for (session_t *s = sessions; s != NULL; s = s->next)
    if (s->handle == h) return s;
  return NULL;
}

static void session_free(session_t *s) {
  operation_end(&s->sign);
  operation_end(&s->verify);
  pkcs11_search_end(&s->search);
  free(s);
}

CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out) {
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&lock);
  session_t *s = session_find(h);
  if (s == NULL)
    rv = CKR_SESSION_HANDLE_INVALID;
  else if (s->busy)
    rv = CKR_OPERATION_ACTIVE; /* another thread is inside a call on this handle */
  else
    s->busy = 1;
  pthread_mutex_unlock(&lock);
  if (rv != CKR_OK) life_leave();
  *out = rv == CKR_OK ? s : NULL;
  return rv;
}

void session_leave(session_t *s) {
  pthread_mutex_lock(&lock);
  s->busy = 0;
  pthread_mutex_unlock(&lock);
  life_leave();
}

CK_RV session_open(CK_SLOT_ID slot, CK_FLAGS flags, CK_SESSION_HANDLE *handle) {
  session_t *s = calloc(1, sizeof *s);
  if (s == NULL) return CKR_HOST_MEMORY;
  s->slot = slot;
  s->flags = flags;
  pthread_mutex_lock(&lock);
  s->handle = next_handle++;
  s->next = sessions;
  sessions = s;
  pthread_mutex_unlock(&lock);
  *handle = s->handle;
  return CKR_OK;
}

/* Closes the sessions `match` picks, unless one of them is busy (CKR_OPERATION_ACTIVE). */
static CK_RV close_where(int (*match)(session_t *, CK_ULONG), CK_ULONG arg) {
  CK_RV rv = CKR_OK;
  for (session_t *s = sessions; s != NULL; s = s->next)
    if (match(s, arg) && s->busy) rv = CKR_OPERATION_ACTIVE;
  for (session_t **pp = &sessions; rv == CKR_OK && *pp != NULL;) {
    session_t *s = *pp;
    if (!match(s, arg)) {
      pp = &s->next;
      continue;
    }
    *pp = s->next;
    session_free(s);
  }
  if (sessions == NULL) logged_in = 0; /* closing the last session logs out */
  return rv;
}

static int by_handle(session_t *s, CK_ULONG h) { return s->handle == h; }
static int by_slot(session_t *s, CK_ULONG slot) { return s->slot == slot; }

CK_RV session_close(CK_SESSION_HANDLE h) {
  pthread_mutex_lock(&lock);
  CK_RV rv = session_find(h) != NULL ? close_where(by_handle, h) : CKR_SESSION_HANDLE_INVALID;
  pthread_mutex_unlock(&lock);
  return rv;
}

CK_RV sessions_close_slot(CK_SLOT_ID slot) {
  pthread_mutex_lock(&lock);
  CK_RV rv = close_where(by_slot, slot);
  pthread_mutex_unlock(&lock);
  return rv;
}

void sessions_free(void) {
  for (session_t *s = sessions, *next; s != NULL; s = next) {
    next = s->next;
    session_free(s);
  }
  sessions = NULL;
  next_handle = 1;
  logged_in = 0;
}

void sessions_reset_lock(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&lock, &fresh, sizeof fresh);
}

void session_info(const session_t *s, CK_SESSION_INFO *info) {
  pthread_mutex_lock(&lock);
  int user = logged_in;
  pthread_mutex_unlock(&lock);
  int rw = (s->flags & CKF_RW_SESSION) != 0;
  info->slotID = s->slot;
  info->flags = s->flags & (CKF_RW_SESSION | CKF_SERIAL_SESSION);
  info->ulDeviceError = 0;
  info->state = user ? (rw ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS)
                     : (rw ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION);
}

/* No PIN exists. A login with any PIN succeeds and proves nothing, for the tools that log in
 * before they sign; a second one answers CKR_USER_ALREADY_LOGGED_IN, as on the daemon's own
 * module. */
CK_RV session_login(CK_USER_TYPE user) {
  CK_RV rv = CKR_OK;
  pthread_mutex_lock(&lock);
  if (user == CKU_CONTEXT_SPECIFIC)
    rv = CKR_OK; /* no key needs it (CKA_ALWAYS_AUTHENTICATE is false), harmless */
  else if (user != CKU_USER)
    rv = CKR_USER_TYPE_INVALID;
  else if (logged_in)
    rv = CKR_USER_ALREADY_LOGGED_IN;
  else
    logged_in = 1;
  pthread_mutex_unlock(&lock);
  return rv;
}

CK_RV session_logout(void) {
  pthread_mutex_lock(&lock);
  CK_RV rv = logged_in ? CKR_OK : CKR_USER_NOT_LOGGED_IN;
  logged_in = 0;
  pthread_mutex_unlock(&lock);
  return rv;
}
