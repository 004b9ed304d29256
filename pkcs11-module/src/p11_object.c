/* Object functions: C_GetAttributeValue, C_FindObjectsInit, C_FindObjects, C_FindObjectsFinal.
 * Each entry point checks its arguments and delegates (object.c, pkcs11_search.c). */
#include "object.h"
#include "pkcs11_functions.h"
#include "session.h"

static CK_RV attributes_of(CK_SLOT_ID slot, CK_OBJECT_HANDLE hObject, CK_ATTRIBUTE *pTemplate,
                           CK_ULONG ulCount) {
  object_kind kind;
  remote_key *k = object_key(slot, hObject, &kind);
  return k != NULL ? object_attributes(k, kind, pTemplate, ulCount) : CKR_OBJECT_HANDLE_INVALID;
}

CK_RV C_GetAttributeValue(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject,
                          CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  if (pTemplate == NULL && ulCount > 0) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s, attributes_of(s->slot, hObject, pTemplate, ulCount));
}

CK_RV C_FindObjectsInit(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  if (pTemplate == NULL && ulCount > 0) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             s->search.active ? CKR_OPERATION_ACTIVE
                              : objects_find(s->slot, pTemplate, ulCount, &s->search));
}

CK_RV C_FindObjects(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE *phObject,
                    CK_ULONG ulMaxObjectCount, CK_ULONG *pulObjectCount) {
  if (phObject == NULL || pulObjectCount == NULL) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_search_next(&s->search, phObject, ulMaxObjectCount, pulObjectCount));
}

CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE hSession) {
  IN_SESSION(hSession, s, pkcs11_search_end(&s->search));
}
