/* Slot and token functions: C_GetSlotList, C_GetSlotInfo, C_GetTokenInfo, C_GetMechanismList,
 * C_GetMechanismInfo. Each entry point checks its arguments and delegates (slot.c). */
#include "life.h"
#include "pkcs11_functions.h"
#include "slot.h"

CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID *pSlotList, CK_ULONG *pulCount) {
  (void)tokenPresent; /* every slot has its token */
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  rv = slots_list(pSlotList, pulCount);
  life_leave();
  return rv;
}

CK_RV C_GetSlotInfo(CK_SLOT_ID slotID, CK_SLOT_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  slot_t *s = slot_by_id(slotID);
  if (s != NULL)
    slot_info(s, pInfo);
  else
    rv = CKR_SLOT_ID_INVALID;
  life_leave();
  return rv;
}

/* The slot, its /token fetched once; or why not. */
static CK_RV listed_slot(CK_SLOT_ID id, slot_t **out) {
  *out = slot_by_id(id);
  return *out == NULL ? CKR_SLOT_ID_INVALID : slot_refresh(*out, -1);
}

CK_RV C_GetTokenInfo(CK_SLOT_ID slotID, CK_TOKEN_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  slot_t *s;
  rv = listed_slot(slotID, &s);
  if (rv == CKR_OK) slot_token_info(s, pInfo);
  life_leave();
  return rv;
}

CK_RV C_GetMechanismList(CK_SLOT_ID slotID, CK_MECHANISM_TYPE *pList, CK_ULONG *pulCount) {
  if (pulCount == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  slot_t *s;
  rv = listed_slot(slotID, &s);
  if (rv == CKR_OK) rv = slot_mechanisms(s, pList, pulCount);
  life_leave();
  return rv;
}

CK_RV C_GetMechanismInfo(CK_SLOT_ID slotID, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *pInfo) {
  if (pInfo == NULL) return CKR_ARGUMENTS_BAD;
  CK_RV rv = life_enter();
  if (rv != CKR_OK) return rv;
  slot_t *s;
  rv = listed_slot(slotID, &s);
  if (rv == CKR_OK) rv = slot_mechanism_info(s, type, pInfo);
  life_leave();
  return rv;
}
