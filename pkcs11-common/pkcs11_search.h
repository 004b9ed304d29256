/* A session's object search: C_FindObjectsInit collects the matching handles, C_FindObjects hands
 * them out in order, C_FindObjectsFinal ends the search. */
#ifndef SVCD_PKCS11_FIND_H
#define SVCD_PKCS11_FIND_H

#include <stddef.h>

#include "pkcs11.h"

typedef struct {
  int active;
  CK_OBJECT_HANDLE *found;
  size_t count, cap, next;
} pkcs11_search;

/* Starts a search with room for `cap` handles (the caller has refused a second search). */
CK_RV pkcs11_search_start(pkcs11_search *s, size_t cap);
/* Adds a matching handle; the caller adds at most `cap`. */
void pkcs11_search_add(pkcs11_search *s, CK_OBJECT_HANDLE h);
/* C_FindObjects: the next handles, at most `max`. */
CK_RV pkcs11_search_next(pkcs11_search *s, CK_OBJECT_HANDLE *out, CK_ULONG max, CK_ULONG *count);
/* C_FindObjectsFinal, and a session's close: CKR_OPERATION_NOT_INITIALIZED when no search ran. */
CK_RV pkcs11_search_end(pkcs11_search *s);

#endif
