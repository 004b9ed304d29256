/* The objects of a slot: per key /token lists, a private key (CKA_SIGN), a public key (CKA_VERIFY)
 * and, when /token lists one, its X.509 certificate; their handles and their attributes. */
#ifndef SVCP11_OBJECT_H
#define SVCP11_OBJECT_H

#include "keys.h"
#include "pkcs11.h"
#include "pkcs11_search.h"

/* Which of a key's objects a handle names. */
typedef enum { OBJ_PUBLIC_KEY, OBJ_PRIVATE_KEY, OBJ_CERTIFICATE } object_kind;

/* The key behind a handle of slot `slot_id`, or NULL (another slot's, unknown, no longer listed,
 * or a certificate the key no longer has); *kind says which of its objects the handle names. */
remote_key *object_key(CK_SLOT_ID slot_id, CK_OBJECT_HANDLE h, object_kind *kind);
/* C_GetAttributeValue's answer for one object, filling `tpl`. */
CK_RV object_attributes(const remote_key *k, object_kind kind, CK_ATTRIBUTE *tpl, CK_ULONG n);
/* Starts `search` with the handles of the slot's objects that match `tpl`. */
CK_RV objects_find(CK_SLOT_ID slot_id, const CK_ATTRIBUTE *tpl, CK_ULONG n,
                   pkcs11_search *search);

#endif
