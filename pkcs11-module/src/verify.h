/* Local verification with libcrypto for the key types verified here (key_type_verified_here). */
#ifndef SVCP11_VERIFY_H
#define SVCP11_VERIFY_H

#include <stddef.h>

#include "keys.h"

/* Verifies `sig` with the key's public key: over the digest `data` made with `md_nid` (EC, RSA-PSS
 * with MGF1 of that hash and a salt of its length), or over the message `data` (Ed25519).
 * CKR_SIGNATURE_INVALID when it does not verify. */
CK_RV verify_local(const remote_key *k, int md_nid, const unsigned char *data, size_t len,
                   const unsigned char *sig, size_t sig_len);

#endif
