/* Session and login functions: C_OpenSession, C_CloseSession, C_CloseAllSessions,
 * C_GetSessionInfo, C_Login, C_Logout. Each entry point checks its arguments and delegates
 * (session.c). */
#include "life.h"
#include "pkcs11_functions.h"
#include "session.h"
#include "slot.h"

CK_RV C_OpenSession(CK_SLOT_ID slotID, CK_FLAGS flags, CK_VOID_PTR pApplication,
                    CK_VOID_PTR Notify, CK_SESSION_HANDLE *phSession) {
  (void)pApplication, (void)Notify;
  if (phSession == NULL) return CKR_ARGUMENTS_BAD;
  if (!(flags & CKF_SERIAL_SESSION)) return CKR_SESSION_PARALLEL_NOT_SUPPORTED;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  slot_t *slot = slot_by_id(slotID);
  rv = slot == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(slot, SVCP11_TOKEN_TTL_MS);
  if (rv == CKR_OK) rv = session_open(slotID, flags, phSession);
  life_leave();
  return rv;
}

CK_RV C_CloseSession(CK_SESSION_HANDLE hSession) {
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  rv = session_close(hSession);
  life_leave();
  return rv;
}

CK_RV C_CloseAllSessions(CK_SLOT_ID slotID) {
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  rv = slot_by_id(slotID) == NULL ? CKR_SLOT_ID_INVALID : sessions_close_slot(slotID);
  life_leave();
  return rv;
}

CK_RV C_GetSessionInfo(CK_SESSION_HANDLE hSession, CK_SESSION_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s, (session_info(s, pInfo), CKR_OK));
}

/* The PIN is not looked at: no PIN exists (session.c). */
CK_RV C_Login(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType, CK_UTF8CHAR *pPin,
              CK_ULONG ulPinLen) {
  (void)pPin, (void)ulPinLen;
  IN_SESSION(hSession, s, session_login(userType));
}

CK_RV C_Logout(CK_SESSION_HANDLE hSession) {
  IN_SESSION(hSession, s, session_logout());
}
