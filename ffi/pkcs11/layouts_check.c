/* Prints sizeof and offsetof of every CK_* structure ffi/pkcs11/layouts.ts mirrors, as a C compiler
 * lays them out from a PKCS#11 header, one "NAME SIZE" or "NAME.field OFFSET" per line, for
 * layouts_test.ts to compare with SIZE and OFFSET.
 *
 * Built twice: -DHEADER_NSS against NSS's pkcs11.h (an independent transcription of the OASIS
 * headers, v3.0; its CK_C_INITIALIZE_ARGS carries an NSS-only field, so that structure is not taken
 * from it), and -DHEADER_SVCD against the project's v3.2 header (pkcs11-common), which
 * alone declares CK_SIGN_ADDITIONAL_CONTEXT. */
#include <stddef.h>
#include <stdio.h>

#if defined(HEADER_NSS)
#include <nss/pkcs11.h>
#elif defined(HEADER_SVCD)
#include "pkcs11.h"
#else
#error "define HEADER_NSS or HEADER_SVCD"
#endif

#define SIZE(T) printf("%s %zu\n", #T, sizeof(T))
#define AT(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))

static void common(void) {
  SIZE(CK_ULONG);
  SIZE(CK_VERSION);
  AT(CK_VERSION, major);
  AT(CK_VERSION, minor);
  SIZE(CK_ATTRIBUTE);
  AT(CK_ATTRIBUTE, type);
  AT(CK_ATTRIBUTE, pValue);
  AT(CK_ATTRIBUTE, ulValueLen);
  SIZE(CK_MECHANISM);
  AT(CK_MECHANISM, mechanism);
  AT(CK_MECHANISM, pParameter);
  AT(CK_MECHANISM, ulParameterLen);
  SIZE(CK_MECHANISM_INFO);
  AT(CK_MECHANISM_INFO, ulMinKeySize);
  AT(CK_MECHANISM_INFO, ulMaxKeySize);
  AT(CK_MECHANISM_INFO, flags);
  SIZE(CK_INFO);
  AT(CK_INFO, cryptokiVersion);
  AT(CK_INFO, manufacturerID);
  AT(CK_INFO, flags);
  AT(CK_INFO, libraryDescription);
  AT(CK_INFO, libraryVersion);
  SIZE(CK_SLOT_INFO);
  AT(CK_SLOT_INFO, slotDescription);
  AT(CK_SLOT_INFO, manufacturerID);
  AT(CK_SLOT_INFO, flags);
  AT(CK_SLOT_INFO, hardwareVersion);
  AT(CK_SLOT_INFO, firmwareVersion);
  SIZE(CK_TOKEN_INFO);
  AT(CK_TOKEN_INFO, label);
  AT(CK_TOKEN_INFO, manufacturerID);
  AT(CK_TOKEN_INFO, model);
  AT(CK_TOKEN_INFO, serialNumber);
  AT(CK_TOKEN_INFO, flags);
  AT(CK_TOKEN_INFO, ulMaxSessionCount);
  AT(CK_TOKEN_INFO, ulSessionCount);
  AT(CK_TOKEN_INFO, ulMaxRwSessionCount);
  AT(CK_TOKEN_INFO, ulRwSessionCount);
  AT(CK_TOKEN_INFO, ulMaxPinLen);
  AT(CK_TOKEN_INFO, ulMinPinLen);
  AT(CK_TOKEN_INFO, ulTotalPublicMemory);
  AT(CK_TOKEN_INFO, ulFreePublicMemory);
  AT(CK_TOKEN_INFO, ulTotalPrivateMemory);
  AT(CK_TOKEN_INFO, ulFreePrivateMemory);
  AT(CK_TOKEN_INFO, hardwareVersion);
  AT(CK_TOKEN_INFO, firmwareVersion);
  AT(CK_TOKEN_INFO, utcTime);
  SIZE(CK_SESSION_INFO);
  AT(CK_SESSION_INFO, slotID);
  AT(CK_SESSION_INFO, state);
  AT(CK_SESSION_INFO, flags);
  AT(CK_SESSION_INFO, ulDeviceError);
  SIZE(CK_INTERFACE);
  AT(CK_INTERFACE, pInterfaceName);
  AT(CK_INTERFACE, pFunctionList);
  AT(CK_INTERFACE, flags);
}

int main(void) {
  common();
#if defined(HEADER_NSS)
  SIZE(CK_RSA_PKCS_PSS_PARAMS);
  AT(CK_RSA_PKCS_PSS_PARAMS, hashAlg);
  AT(CK_RSA_PKCS_PSS_PARAMS, mgf);
  AT(CK_RSA_PKCS_PSS_PARAMS, sLen);
#else
  SIZE(CK_C_INITIALIZE_ARGS);
  AT(CK_C_INITIALIZE_ARGS, CreateMutex);
  AT(CK_C_INITIALIZE_ARGS, DestroyMutex);
  AT(CK_C_INITIALIZE_ARGS, LockMutex);
  AT(CK_C_INITIALIZE_ARGS, UnlockMutex);
  AT(CK_C_INITIALIZE_ARGS, flags);
  AT(CK_C_INITIALIZE_ARGS, pReserved);
  SIZE(CK_SIGN_ADDITIONAL_CONTEXT);
  AT(CK_SIGN_ADDITIONAL_CONTEXT, hedgeVariant);
  AT(CK_SIGN_ADDITIONAL_CONTEXT, pContext);
  AT(CK_SIGN_ADDITIONAL_CONTEXT, ulContextLen);
#endif
  return 0;
}
