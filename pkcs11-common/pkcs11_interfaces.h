/* The function tables and interfaces both of the project's modules hand out (the client module and
 * the test module): one 3.2 table whose unimplemented entries answer CKR_FUNCTION_NOT_SUPPORTED,
 * older-version copies of it, and the lookups of C_GetInterfaceList and C_GetInterface over a
 * module's own list of interfaces. */
#ifndef SVCD_PKCS11_INTERFACES_H
#define SVCD_PKCS11_INTERFACES_H

#include <string.h>

#include "pkcs11.h"
#include "pkcs11_functions.h"

/* Fills the entries `t32` leaves NULL with `not_supported`, then makes the 3.0 and 2.40 tables: they
 * share the entries, and a caller reads only as many as its version has. */
static inline void pkcs11_fill_tables(CK_FUNCTION_LIST_3_2 *t32, CK_FUNCTION_LIST_3_2 *t30,
                                      CK_FUNCTION_LIST_3_2 *t240, CK_ANY_FN not_supported) {
  for (unsigned i = 0; i < IDX_COUNT; i++)
    if (t32->fn[i] == NULL) t32->fn[i] = not_supported;
  *t30 = *t32;
  t30->version = (CK_VERSION){3, 0};
  *t240 = *t32;
  t240->version = (CK_VERSION){2, 40};
}

/* C_GetInterfaceList over `n` interfaces. */
static inline CK_RV pkcs11_interface_list(const CK_INTERFACE *interfaces, CK_ULONG n,
                                          CK_INTERFACE *pList, CK_ULONG *pulCount) {
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  if (pList == NULL) {
    *pulCount = n;
    return CKR_OK;
  }
  if (*pulCount < n) {
    *pulCount = n;
    return CKR_BUFFER_TOO_SMALL;
  }
  memcpy(pList, interfaces, n * sizeof interfaces[0]);
  *pulCount = n;
  return CKR_OK;
}

/* C_GetInterface over `n` interfaces: the first whose name, version and flags match what was asked
 * (a NULL name or version matches any; flags the interface lacks, e.g. CKF_INTERFACE_FORK_SAFE,
 * match none). */
static inline CK_RV pkcs11_find_interface(CK_INTERFACE *interfaces, CK_ULONG n,
                                          CK_UTF8CHAR *pName, CK_VERSION *pVersion,
                                          CK_INTERFACE **ppInterface, CK_FLAGS flags) {
  if (ppInterface == NULL) return CKR_ARGUMENTS_BAD;
  for (CK_ULONG i = 0; i < n; i++) {
    CK_INTERFACE *it = &interfaces[i];
    const CK_FUNCTION_LIST_3_2 *t = it->pFunctionList;
    if (pName != NULL && strcmp((const char *)pName, (const char *)it->pInterfaceName) != 0)
      continue;
    if (pVersion != NULL &&
        (pVersion->major != t->version.major || pVersion->minor != t->version.minor))
      continue;
    if ((flags & it->flags) != flags) continue;
    *ppInterface = it;
    return CKR_OK;
  }
  *ppInterface = NULL;
  return CKR_ARGUMENTS_BAD;
}

#endif
