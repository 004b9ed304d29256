/* Sessions: local state only (no PKCS#11 session crosses the wire), each with its signing and
 * verifying operations and its object search; and the login, which proves nothing (the client
 * certificate is the credential) and is kept for the tools that log in before they sign. */
#ifndef SVCP11_SESSION_H
#define SVCP11_SESSION_H

#include "operation.h"
#include "pkcs11.h"
#include "pkcs11_search.h"

typedef struct session {
  struct session *next;
  CK_SESSION_HANDLE handle;
  CK_SLOT_ID slot;
  CK_FLAGS flags;
  int busy; /* a call on this handle is running */
  pkcs11_search search;
  operation sign, verify;
} session_t;

/* A call on a session: the module's life held for reading and the session marked busy, so a
 * second call on the same handle meanwhile answers CKR_OPERATION_ACTIVE. */
CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out);
void session_leave(session_t *s);
/* The frame of every entry point bound to a session, once its arguments are checked: enter the
 * session of `h` as `s`, return what `call` (an expression of `s`) answers, leave the session. */
#define IN_SESSION(h, s, call)                         \
  do {                                                 \
    session_t *s;                                      \
    CK_RV in_session_rv = session_enter((h), &s);      \
    if (in_session_rv != CKR_OK) return in_session_rv; \
    in_session_rv = (call);                            \
    session_leave(s);                                  \
    return in_session_rv;                              \
  } while (0)
/* A new session on the slot, its handle in *handle. The caller holds the module's life. */
CK_RV session_open(CK_SLOT_ID slot, CK_FLAGS flags, CK_SESSION_HANDLE *handle);
/* C_CloseSession and C_CloseAllSessions (the caller holds the module's life); closing the last
 * session logs out. */
CK_RV session_close(CK_SESSION_HANDLE h);
CK_RV sessions_close_slot(CK_SLOT_ID slot);
/* At C_Finalize: every session goes, and the login with them. */
void sessions_free(void);
/* In a forked child: the inherited lock may be held by a thread that does not exist there. */
void sessions_reset_lock(void);
/* C_GetSessionInfo's answer: the slot, the flags, the state (public or user functions). */
void session_info(const session_t *s, CK_SESSION_INFO *info);
/* C_Login and C_Logout on behalf of any session. */
CK_RV session_login(CK_USER_TYPE user);
CK_RV session_logout(void);

#endif
