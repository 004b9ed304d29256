/* The PKCS#11 v3.2 functions: the 104 entries of the function table in table order (v2.40: the
 * first 68; 3.0: the first 92), each entry's index (IDX_<name>), and the prototypes of the functions
 * the project's modules implement. A prototype here is what exports a module's function: the
 * modules build with -fvisibility=hidden, so a C_* function defined without one stays internal. */
#ifndef SVCD_PKCS11_FUNCTIONS_H
#define SVCD_PKCS11_FUNCTIONS_H

#include "pkcs11.h"

/* X(name) is expanded by the includer. */
#define PKCS11_FUNCTIONS(X)                                                                      \
  X(C_Initialize) X(C_Finalize) X(C_GetInfo) X(C_GetFunctionList) X(C_GetSlotList)              \
  X(C_GetSlotInfo) X(C_GetTokenInfo) X(C_GetMechanismList) X(C_GetMechanismInfo) X(C_InitToken) \
  X(C_InitPIN) X(C_SetPIN) X(C_OpenSession) X(C_CloseSession) X(C_CloseAllSessions)             \
  X(C_GetSessionInfo) X(C_GetOperationState) X(C_SetOperationState) X(C_Login) X(C_Logout)      \
  X(C_CreateObject) X(C_CopyObject) X(C_DestroyObject) X(C_GetObjectSize)                       \
  X(C_GetAttributeValue) X(C_SetAttributeValue) X(C_FindObjectsInit) X(C_FindObjects)           \
  X(C_FindObjectsFinal) X(C_EncryptInit) X(C_Encrypt) X(C_EncryptUpdate) X(C_EncryptFinal)      \
  X(C_DecryptInit) X(C_Decrypt) X(C_DecryptUpdate) X(C_DecryptFinal) X(C_DigestInit)            \
  X(C_Digest) X(C_DigestUpdate) X(C_DigestKey) X(C_DigestFinal) X(C_SignInit) X(C_Sign)         \
  X(C_SignUpdate) X(C_SignFinal) X(C_SignRecoverInit) X(C_SignRecover) X(C_VerifyInit)          \
  X(C_Verify) X(C_VerifyUpdate) X(C_VerifyFinal) X(C_VerifyRecoverInit) X(C_VerifyRecover)      \
  X(C_DigestEncryptUpdate) X(C_DecryptDigestUpdate) X(C_SignEncryptUpdate)                      \
  X(C_DecryptVerifyUpdate) X(C_GenerateKey) X(C_GenerateKeyPair) X(C_WrapKey) X(C_UnwrapKey)    \
  X(C_DeriveKey) X(C_SeedRandom) X(C_GenerateRandom) X(C_GetFunctionStatus)                     \
  X(C_CancelFunction) X(C_WaitForSlotEvent)                                                     \
  /* 3.0 */                                                                                     \
  X(C_GetInterfaceList) X(C_GetInterface) X(C_LoginUser) X(C_SessionCancel)                     \
  X(C_MessageEncryptInit) X(C_EncryptMessage) X(C_EncryptMessageBegin) X(C_EncryptMessageNext)  \
  X(C_MessageEncryptFinal) X(C_MessageDecryptInit) X(C_DecryptMessage)                          \
  X(C_DecryptMessageBegin) X(C_DecryptMessageNext) X(C_MessageDecryptFinal)                     \
  X(C_MessageSignInit) X(C_SignMessage) X(C_SignMessageBegin) X(C_SignMessageNext)              \
  X(C_MessageSignFinal) X(C_MessageVerifyInit) X(C_VerifyMessage) X(C_VerifyMessageBegin)       \
  X(C_VerifyMessageNext) X(C_MessageVerifyFinal)                                                \
  /* 3.2 */                                                                                     \
  X(C_EncapsulateKey) X(C_DecapsulateKey) X(C_VerifySignatureInit) X(C_VerifySignature)         \
  X(C_VerifySignatureUpdate) X(C_VerifySignatureFinal) X(C_GetSessionValidationFlags)           \
  X(C_AsyncComplete) X(C_AsyncGetID) X(C_AsyncJoin) X(C_WrapKeyAuthenticated)                   \
  X(C_UnwrapKeyAuthenticated)

#define PKCS11_INDEX(name) IDX_##name,
enum { PKCS11_FUNCTIONS(PKCS11_INDEX) IDX_COUNT };

#define PKCS11_EXPORT __attribute__((visibility("default")))

/* General purpose, slot and token management. */
PKCS11_EXPORT CK_RV C_Initialize(CK_VOID_PTR pInitArgs);
PKCS11_EXPORT CK_RV C_Finalize(CK_VOID_PTR pReserved);
PKCS11_EXPORT CK_RV C_GetInfo(CK_INFO *pInfo);
PKCS11_EXPORT CK_RV C_GetFunctionList(CK_FUNCTION_LIST_3_2 **ppFunctionList);
PKCS11_EXPORT CK_RV C_GetInterfaceList(CK_INTERFACE *pList, CK_ULONG *pulCount);
PKCS11_EXPORT CK_RV C_GetInterface(CK_UTF8CHAR *pName, CK_VERSION *pVersion,
                                   CK_INTERFACE **ppInterface, CK_FLAGS flags);
PKCS11_EXPORT CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID *pSlotList,
                                  CK_ULONG *pulCount);
PKCS11_EXPORT CK_RV C_GetSlotInfo(CK_SLOT_ID slotID, CK_SLOT_INFO *pInfo);
PKCS11_EXPORT CK_RV C_GetTokenInfo(CK_SLOT_ID slotID, CK_TOKEN_INFO *pInfo);
PKCS11_EXPORT CK_RV C_GetMechanismList(CK_SLOT_ID slotID, CK_MECHANISM_TYPE *pList,
                                       CK_ULONG *pulCount);
PKCS11_EXPORT CK_RV C_GetMechanismInfo(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type,
                                       CK_MECHANISM_INFO *pInfo);
PKCS11_EXPORT CK_RV C_InitToken(CK_SLOT_ID slotID, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen,
                                CK_UTF8CHAR *pLabel);
PKCS11_EXPORT CK_RV C_InitPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen);
PKCS11_EXPORT CK_RV C_SetPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pOldPin, CK_ULONG ulOldLen,
                             CK_UTF8CHAR *pNewPin, CK_ULONG ulNewLen);

/* Sessions and login. */
PKCS11_EXPORT CK_RV C_OpenSession(CK_SLOT_ID slotID, CK_FLAGS flags, CK_VOID_PTR pApplication,
                                  CK_VOID_PTR Notify, CK_SESSION_HANDLE *phSession);
PKCS11_EXPORT CK_RV C_CloseSession(CK_SESSION_HANDLE hSession);
PKCS11_EXPORT CK_RV C_CloseAllSessions(CK_SLOT_ID slotID);
PKCS11_EXPORT CK_RV C_GetSessionInfo(CK_SESSION_HANDLE hSession, CK_SESSION_INFO *pInfo);
PKCS11_EXPORT CK_RV C_Login(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType, CK_UTF8CHAR *pPin,
                            CK_ULONG ulPinLen);
PKCS11_EXPORT CK_RV C_Logout(CK_SESSION_HANDLE hSession);

/* Objects. */
PKCS11_EXPORT CK_RV C_CreateObject(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate,
                                   CK_ULONG ulCount, CK_OBJECT_HANDLE *phObject);
PKCS11_EXPORT CK_RV C_DestroyObject(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject);
PKCS11_EXPORT CK_RV C_GetAttributeValue(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject,
                                        CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount);
PKCS11_EXPORT CK_RV C_FindObjectsInit(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate,
                                      CK_ULONG ulCount);
PKCS11_EXPORT CK_RV C_FindObjects(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE *phObject,
                                  CK_ULONG ulMaxObjectCount, CK_ULONG *pulObjectCount);
PKCS11_EXPORT CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE hSession);

/* Message digesting. */
PKCS11_EXPORT CK_RV C_DigestInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism);
PKCS11_EXPORT CK_RV C_Digest(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                             CK_BYTE *pDigest, CK_ULONG *pulDigestLen);
PKCS11_EXPORT CK_RV C_DigestUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen);
PKCS11_EXPORT CK_RV C_DigestFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pDigest,
                                  CK_ULONG *pulDigestLen);

/* Signing and verifying. */
PKCS11_EXPORT CK_RV C_SignInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                               CK_OBJECT_HANDLE hKey);
PKCS11_EXPORT CK_RV C_Sign(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                           CK_BYTE *pSignature, CK_ULONG *pulSignatureLen);
PKCS11_EXPORT CK_RV C_SignUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen);
PKCS11_EXPORT CK_RV C_SignFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature,
                                CK_ULONG *pulSignatureLen);
PKCS11_EXPORT CK_RV C_VerifyInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                                 CK_OBJECT_HANDLE hKey);
PKCS11_EXPORT CK_RV C_Verify(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                             CK_BYTE *pSignature, CK_ULONG ulSignatureLen);
PKCS11_EXPORT CK_RV C_VerifyUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen);
PKCS11_EXPORT CK_RV C_VerifyFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature,
                                  CK_ULONG ulSignatureLen);
PKCS11_EXPORT CK_RV C_VerifySignatureInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                                          CK_OBJECT_HANDLE hKey, CK_BYTE *pSignature,
                                          CK_ULONG ulSignatureLen);
PKCS11_EXPORT CK_RV C_VerifySignature(CK_SESSION_HANDLE hSession, CK_BYTE *pData,
                                      CK_ULONG ulDataLen);
PKCS11_EXPORT CK_RV C_VerifySignatureUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart,
                                            CK_ULONG ulPartLen);
PKCS11_EXPORT CK_RV C_VerifySignatureFinal(CK_SESSION_HANDLE hSession);

/* Key generation and random numbers. */
PKCS11_EXPORT CK_RV C_GenerateKey(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                                  CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount,
                                  CK_OBJECT_HANDLE *phKey);
PKCS11_EXPORT CK_RV C_GenerateKeyPair(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                                      CK_ATTRIBUTE *pPublicKeyTemplate,
                                      CK_ULONG ulPublicKeyAttributeCount,
                                      CK_ATTRIBUTE *pPrivateKeyTemplate,
                                      CK_ULONG ulPrivateKeyAttributeCount,
                                      CK_OBJECT_HANDLE *phPublicKey, CK_OBJECT_HANDLE *phPrivateKey);
PKCS11_EXPORT CK_RV C_SeedRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pSeed, CK_ULONG ulSeedLen);
PKCS11_EXPORT CK_RV C_GenerateRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pRandomData,
                                     CK_ULONG ulRandomLen);

#endif
