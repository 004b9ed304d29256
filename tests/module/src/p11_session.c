/* Session functions: C_OpenSession, C_CloseSession, C_CloseAllSessions, C_GetSessionInfo. */
#include <string.h>

#include "pkcs11_functions.h"
#include "svcmod.h"

CK_RV C_OpenSession(CK_SLOT_ID slotID, CK_FLAGS flags, CK_VOID_PTR pApplication,
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

CK_RV C_CloseSession(CK_SESSION_HANDLE hSession) {
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

CK_RV C_CloseAllSessions(CK_SLOT_ID slotID) {
  pthread_mutex_lock(&g.lock);
  CK_RV rv = !g.initialized ? CKR_CRYPTOKI_NOT_INITIALIZED
             : slotID != 0  ? CKR_SLOT_ID_INVALID
                            : CKR_OK;
  if (rv == CKR_OK) close_all_locked();
  pthread_mutex_unlock(&g.lock);
  return rv;
}

CK_RV C_GetSessionInfo(CK_SESSION_HANDLE hSession, CK_SESSION_INFO *pInfo) {
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
