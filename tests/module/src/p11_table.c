/* The entries this module implements and the interfaces it offers, for pkcs11_interfaces.c:
 * C_GetInterface("PKCS 11") (or a NULL name) gives the 3.2 table, version {3,0} the same entries
 * under 3.0; C_GetFunctionList hands them out in a table whose version says 2.40. */
#include "pkcs11_interfaces.h"

const pkcs11_module_functions pkcs11_this_module = {
    .entries = {ENTRY(C_Initialize), ENTRY(C_Finalize), ENTRY(C_GetInfo), ENTRY(C_GetSlotList),
                ENTRY(C_GetSlotInfo), ENTRY(C_GetTokenInfo), ENTRY(C_GetMechanismList),
                ENTRY(C_GetMechanismInfo), ENTRY(C_InitToken), ENTRY(C_InitPIN), ENTRY(C_SetPIN),
                ENTRY(C_OpenSession), ENTRY(C_CloseSession), ENTRY(C_CloseAllSessions),
                ENTRY(C_GetSessionInfo), ENTRY(C_Login), ENTRY(C_Logout), ENTRY(C_CreateObject),
                ENTRY(C_DestroyObject), ENTRY(C_GetAttributeValue), ENTRY(C_FindObjectsInit),
                ENTRY(C_FindObjects), ENTRY(C_FindObjectsFinal), ENTRY(C_DigestInit),
                ENTRY(C_Digest), ENTRY(C_DigestUpdate), ENTRY(C_DigestFinal), ENTRY(C_SignInit),
                ENTRY(C_Sign), ENTRY(C_SignUpdate), ENTRY(C_SignFinal), ENTRY(C_VerifyInit),
                ENTRY(C_Verify), ENTRY(C_VerifyUpdate), ENTRY(C_VerifyFinal),
                ENTRY(C_GenerateKey), ENTRY(C_GenerateKeyPair), ENTRY(C_SeedRandom),
                ENTRY(C_GenerateRandom), ENTRY(C_VerifySignatureInit), ENTRY(C_VerifySignature),
                ENTRY(C_VerifySignatureUpdate), ENTRY(C_VerifySignatureFinal)},
    .versions = {{3, 2}, {3, 0}},
    .nversions = 2,
};
