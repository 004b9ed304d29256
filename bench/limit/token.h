/* The token: the PKCS#11 module, its slot, the login, and the signatures it makes. */
#ifndef SVCD_LIMIT_TOKEN_H
#define SVCD_LIMIT_TOKEN_H

#include <stddef.h>

#include "pkcs11_functions.h"

extern CK_FUNCTION_LIST_3_2 *p11;
/* A function of the module's table, typed as its prototype. */
#define P11(name) ((__typeof__(&name))p11->fn[IDX_##name])

/* Loads --module and C_Initialize (OS locking); dies when it cannot. */
void load_module(void);
/* Picks the slot whose token has --token as its label; dies when none has. */
void find_slot(void);
/* A read-write session on that slot; dies when the module refuses one. */
CK_SESSION_HANDLE open_session(void);
/* One C_Login with the PIN file's bytes (one trailing newline removed), zeroed when it returns. */
void login(CK_SESSION_HANDLE s);
/* The token object of class `cls` labelled `label`, or CK_INVALID_HANDLE. */
CK_OBJECT_HANDLE find_object(CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label);
/* C_SignInit + C_Sign; the signature's length, or 0. */
size_t token_sign(CK_SESSION_HANDLE s, CK_MECHANISM_TYPE mech, CK_OBJECT_HANDLE key,
                  const unsigned char *data, size_t len, unsigned char *out, size_t cap);

/* A worker thread's session and its session copies of the keys it has used. */
struct worker {
  CK_SESSION_HANDLE session;
  struct {
    char label[256];
    CK_OBJECT_HANDLE copy;
  } keys[16];
  int nkeys;
};

/* The session copy of the EC P-256 key `label` (CKA_TOKEN false), made at its first use; or
 * CK_INVALID_HANDLE when there is no such key. */
CK_OBJECT_HANDLE key_copy(struct worker *w, const char *label, size_t len);

#endif
