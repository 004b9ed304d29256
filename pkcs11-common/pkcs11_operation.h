/* The course of a sign or verify operation, the same in both modules: C_Sign / C_SignUpdate /
 * C_SignFinal and C_Verify / C_VerifyUpdate / C_VerifyFinal once the module's Init has started it.
 * Who may call when, the two-call length convention, which failures end the operation: here. What
 * an operation does with the data: the module's, through its pkcs11_operation_kind. */
#ifndef SVCD_PKCS11_OPERATION_H
#define SVCD_PKCS11_OPERATION_H

#include "pkcs11.h"

/* Each module defines the struct; this file only passes it on. */
typedef struct pkcs11_operation pkcs11_operation;

typedef struct {
  /* Started by the matching Init and not ended. */
  int (*active)(const pkcs11_operation *op);
  /* A part has been taken: the operation is multi-part, and the single-part call is refused. */
  int (*updated)(const pkcs11_operation *op);
  CK_ULONG (*signature_length)(const pkcs11_operation *op);
  CK_RV (*update)(pkcs11_operation *op, const CK_BYTE *part, CK_ULONG len);
  /* Sign `data` (single-part) or the parts taken (final) into `sig` of signature_length bytes. */
  CK_RV (*sign)(pkcs11_operation *op, const CK_BYTE *data, CK_ULONG len, CK_BYTE *sig);
  CK_RV (*sign_final)(pkcs11_operation *op, CK_BYTE *sig);
  /* CKR_OK, CKR_SIGNATURE_INVALID, or why it could not be told. */
  CK_RV (*verify)(pkcs11_operation *op, const CK_BYTE *data, CK_ULONG len, const CK_BYTE *sig,
                  CK_ULONG sig_len);
  CK_RV (*verify_final)(pkcs11_operation *op, const CK_BYTE *sig, CK_ULONG sig_len);
  /* Ends the operation and frees what it holds. */
  void (*end)(pkcs11_operation *op);
} pkcs11_operation_kind;

/* The two-call convention of a function that returns bytes: without a buffer it reports the
 * length (*rv CKR_OK); with too small a buffer, the length and CKR_BUFFER_TOO_SMALL. Returns 1
 * when `out` takes the output, 0 when the call ends with *rv. */
int pkcs11_output_fits(const CK_BYTE *out, CK_ULONG *len, CK_ULONG need, CK_RV *rv);

/* The bodies of C_Sign, C_SignUpdate / C_VerifyUpdate, C_SignFinal, C_Verify and C_VerifyFinal
 * for the session's operation `op`. A length query or too small a buffer keeps the operation;
 * any other answer after Init ends it. */
CK_RV pkcs11_sign(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *data,
                  CK_ULONG len, CK_BYTE *sig, CK_ULONG *sig_len);
CK_RV pkcs11_update(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *part,
                    CK_ULONG len);
CK_RV pkcs11_sign_final(const pkcs11_operation_kind *kind, pkcs11_operation *op, CK_BYTE *sig,
                        CK_ULONG *sig_len);
CK_RV pkcs11_verify(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *data,
                    CK_ULONG len, const CK_BYTE *sig, CK_ULONG sig_len);
CK_RV pkcs11_verify_final(const pkcs11_operation_kind *kind, pkcs11_operation *op,
                          const CK_BYTE *sig, CK_ULONG sig_len);

#endif
