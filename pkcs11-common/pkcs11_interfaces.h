/* The function tables and interfaces a module hands out. The module says which entries it
 * implements and which versions it offers; pkcs11_interfaces.c makes one 3.2 table of them (every
 * other entry answers CKR_FUNCTION_NOT_SUPPORTED), the 3.0 and 2.40 tables that share its
 * entries, and C_GetFunctionList, C_GetInterfaceList and C_GetInterface over them. */
#ifndef SVCD_PKCS11_INTERFACES_H
#define SVCD_PKCS11_INTERFACES_H

#include "pkcs11_functions.h"

/* ENTRY(C_Sign) in a module's `entries`: the entry C_Sign at its place in the table. */
#define ENTRY(name) [IDX_##name] = (CK_ANY_FN)name

typedef struct {
  /* By IDX_*; NULL: CKR_FUNCTION_NOT_SUPPORTED. The three lookups above are filled in here. */
  CK_ANY_FN entries[IDX_COUNT];
  /* What C_GetInterfaceList lists, in order: each of 3.2, 3.0 and 2.40, as "PKCS 11" with no
   * flags (no CKF_INTERFACE_FORK_SAFE: neither module is). */
  CK_VERSION versions[3];
  CK_ULONG nversions;
} pkcs11_module_functions;

/* Defined by each module (its p11_table.c). */
extern const pkcs11_module_functions pkcs11_this_module;

#endif
