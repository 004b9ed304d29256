/* General-purpose functions: C_Initialize, C_Finalize, C_GetInfo. Each entry point checks its
 * arguments and delegates (module.c). */
#include "life.h"
#include "module.h"
#include "pkcs11_functions.h"

static CK_RV check_init_args(CK_VOID_PTR p) {
  if (p == NULL) return CKR_OK;
  const CK_C_INITIALIZE_ARGS *a = p;
  if (a->pReserved != NULL) return CKR_ARGUMENTS_BAD;
  int any = a->CreateMutex != NULL, all = any && a->DestroyMutex && a->LockMutex && a->UnlockMutex;
  if (any && !all) return CKR_ARGUMENTS_BAD;
  if (any && !(a->flags & CKF_OS_LOCKING_OK)) return CKR_CANT_LOCK; /* only the OS's locks */
  return CKR_OK;
}

CK_RV C_Initialize(CK_VOID_PTR pInitArgs) {
  CK_RV rv = check_init_args(pInitArgs);
  return rv == CKR_OK ? module_initialize() : rv;
}

CK_RV C_Finalize(CK_VOID_PTR pReserved) {
  if (pReserved != NULL) return CKR_ARGUMENTS_BAD;
  return module_finalize();
}

CK_RV C_GetInfo(CK_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  module_info(pInfo);
  life_leave();
  return CKR_OK;
}
