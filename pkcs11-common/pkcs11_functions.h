/* The 104 entries of the PKCS#11 v3.2 function table, in table order (v2.40: the first 68; 3.0:
 * the first 92). X(name) is expanded by the includer. */
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
