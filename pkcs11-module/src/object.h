/* The objects of a slot: per key /token lists, a private key (CKA_SIGN) and a public key
 * (CKA_VERIFY), their handles and their attributes. */
#ifndef SVCP11_OBJECT_H
#define SVCP11_OBJECT_H

#include "keys.h"
#include "pkcs11.h"
#include "pkcs11_search.h"

/* The key behind a handle of slot `slot_id`, or NULL (another slot's, unknown, or no longer
 * listed); *is_private says which of its two objects the handle names. */
remote_key *object_key(CK_SLOT_ID slot_id, CK_OBJECT_HANDLE h, int *is_private);
/* C_GetAttributeValue's answer for one object, filling `tpl`. */
CK_RV object_attributes(const remote_key *k, int is_private, CK_ATTRIBUTE *tpl, CK_ULONG n);
/* Starts `search` with the handles of the slot's objects that match `tpl`. */
CK_RV objects_find(CK_SLOT_ID slot_id, const CK_ATTRIBUTE *tpl, CK_ULONG n,
                   pkcs11_search *search);

#endif
