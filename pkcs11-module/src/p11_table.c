/* The entries this module implements and the interfaces it offers, for pkcs11_interfaces.c:
 * C_GetInterface("PKCS 11") gives 3.2; 3.0 and 2.40 are offered too; C_GetFunctionList gives
 * the 2.40 table. */
#include "pkcs11_interfaces.h"

const pkcs11_module_functions pkcs11_this_module = {
    .entries = {ENTRY(C_Initialize), ENTRY(C_Finalize), ENTRY(C_GetInfo), ENTRY(C_GetSlotList),
                ENTRY(C_GetSlotInfo), ENTRY(C_GetTokenInfo), ENTRY(C_GetMechanismList),
                ENTRY(C_GetMechanismInfo), ENTRY(C_OpenSession), ENTRY(C_CloseSession),
                ENTRY(C_CloseAllSessions), ENTRY(C_GetSessionInfo), ENTRY(C_Login),
                ENTRY(C_Logout), ENTRY(C_GetAttributeValue), ENTRY(C_FindObjectsInit),
                ENTRY(C_FindObjects), ENTRY(C_FindObjectsFinal), ENTRY(C_SignInit), ENTRY(C_Sign),
                ENTRY(C_SignUpdate), ENTRY(C_SignFinal), ENTRY(C_VerifyInit), ENTRY(C_Verify),
                ENTRY(C_VerifyUpdate), ENTRY(C_VerifyFinal)},
    .versions = {{3, 2}, {3, 0}, {2, 40}},
    .nversions = 3,
};
