/* A session's signing or verifying operation: its key and mechanism plan, how it takes the data
 * (whole, hashed as it comes, μ, or buffered up to the body limit), and where it ends (the daemon,
 * or libcrypto here). The course of the calls is pkcs11-common's (pkcs11_operation.h). */
#ifndef SVCP11_OPERATION_H
#define SVCP11_OPERATION_H

#include <openssl/evp.h>
#include <stddef.h>

#include "keys.h"
#include "mech.h"
#include "pkcs11_buffer.h"
#include "pkcs11_operation.h"
#include "slot.h"

/* How an operation takes its data: all at once, hashed as it comes, or buffered. */
typedef enum { ACC_NONE, ACC_HASH, ACC_MU, ACC_BUFFER } accumulate_kind;

struct pkcs11_operation {
  int active;
  int verifying;
  remote_key *key;
  slot_t *slot;
  sign_plan plan;
  accumulate_kind acc;
  EVP_MD_CTX *md;
  pkcs11_buffer buf;
  size_t limit;
};
typedef struct pkcs11_operation operation;

/* This module's operation as the shared course of calls drives it. */
extern const pkcs11_operation_kind operation_kind;

/* C_SignInit (signing) or C_VerifyInit: `key` of slot `slot_id` with `mech`. */
CK_RV operation_init(operation *op, CK_SLOT_ID slot_id, const CK_MECHANISM *mech,
                     CK_OBJECT_HANDLE key, int signing);
/* Ends the operation and frees what it holds (also when it never started). */
void operation_end(operation *op);

#endif
