/* C_GetFunctionList, C_GetInterfaceList and C_GetInterface of a module, over the entries and
 * versions it declares in `pkcs11_this_module` (pkcs11_interfaces.h). */
#include "pkcs11_interfaces.h"

#include <pthread.h>
#include <string.h>

_Static_assert(sizeof(CK_INTERFACE) == 24, "CK_INTERFACE layout");
_Static_assert(sizeof(CK_FUNCTION_LIST_3_2) == 840, "3.2 table is 840 bytes");

/* One set of entries under three versions; a caller reads only as many entries as its version
 * has. */
static const CK_VERSION VERSIONS[] = {{3, 2}, {3, 0}, {2, 40}};
#define NTABLES (sizeof VERSIONS / sizeof VERSIONS[0])
static CK_FUNCTION_LIST_3_2 tables[NTABLES];
static CK_INTERFACE interfaces[NTABLES];
static CK_ULONG ninterfaces;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Every entry the module does not implement. Called through a table entry with whatever
 * arguments the caller passes, which it ignores. */
static CK_RV not_supported(void) { return CKR_FUNCTION_NOT_SUPPORTED; }

static CK_FUNCTION_LIST_3_2 *table_of(CK_VERSION v) {
  for (size_t i = 0; i < NTABLES; i++)
    if (VERSIONS[i].major == v.major && VERSIONS[i].minor == v.minor) return &tables[i];
  return NULL;
}

static void fill_tables(void) {
  CK_FUNCTION_LIST_3_2 t = {.version = VERSIONS[0]};
  memcpy(t.fn, pkcs11_this_module.entries, sizeof t.fn);
  t.fn[IDX_C_GetFunctionList] = (CK_ANY_FN)C_GetFunctionList;
  t.fn[IDX_C_GetInterfaceList] = (CK_ANY_FN)C_GetInterfaceList;
  t.fn[IDX_C_GetInterface] = (CK_ANY_FN)C_GetInterface;
  for (unsigned i = 0; i < IDX_COUNT; i++)
    if (t.fn[i] == NULL) t.fn[i] = (CK_ANY_FN)not_supported;
  for (size_t i = 0; i < NTABLES; i++) {
    tables[i] = t;
    tables[i].version = VERSIONS[i];
  }
  for (CK_ULONG i = 0; i < pkcs11_this_module.nversions; i++) {
    CK_FUNCTION_LIST_3_2 *table = table_of(pkcs11_this_module.versions[i]);
    if (table != NULL)
      interfaces[ninterfaces++] = (CK_INTERFACE){(CK_UTF8CHAR *)"PKCS 11", table, 0};
  }
}

/* The table whose version says 2.40, so an application that knows only C_GetFunctionList never
 * reads past the 68 entries it expects; C_GetInterface gives 3.2. */
CK_RV C_GetFunctionList(CK_FUNCTION_LIST_3_2 **ppFunctionList) {
  if (ppFunctionList == NULL) return CKR_ARGUMENTS_BAD;
  pthread_once(&tables_once, fill_tables);
  *ppFunctionList = table_of((CK_VERSION){2, 40});
  return CKR_OK;
}

CK_RV C_GetInterfaceList(CK_INTERFACE *pList, CK_ULONG *pulCount) {
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  pthread_once(&tables_once, fill_tables);
  if (pList == NULL) {
    *pulCount = ninterfaces;
    return CKR_OK;
  }
  if (*pulCount < ninterfaces) {
    *pulCount = ninterfaces;
    return CKR_BUFFER_TOO_SMALL;
  }
  memcpy(pList, interfaces, ninterfaces * sizeof interfaces[0]);
  *pulCount = ninterfaces;
  return CKR_OK;
}

/* The first interface whose name, version and flags match what was asked (a NULL name or version
 * matches any; flags the interface lacks, e.g. CKF_INTERFACE_FORK_SAFE, match none). */
CK_RV C_GetInterface(CK_UTF8CHAR *pName, CK_VERSION *pVersion, CK_INTERFACE **ppInterface,
                     CK_FLAGS flags) {
  if (ppInterface == NULL) return CKR_ARGUMENTS_BAD;
  pthread_once(&tables_once, fill_tables);
  for (CK_ULONG i = 0; i < ninterfaces; i++) {
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
