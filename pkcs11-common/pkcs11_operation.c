#include "pkcs11_operation.h"

int pkcs11_output_fits(const CK_BYTE *out, CK_ULONG *len, CK_ULONG need, CK_RV *rv) {
  *rv = CKR_OK;
  if (out != NULL && *len >= need) return 1;
  if (out != NULL) *rv = CKR_BUFFER_TOO_SMALL;
  *len = need;
  return 0;
}

/* Signs with the two-call convention; any answer but a length ends the operation. */
static CK_RV sign_out(const pkcs11_operation_kind *kind, pkcs11_operation *op,
                      const CK_BYTE *data, CK_ULONG len, int final, CK_BYTE *sig,
                      CK_ULONG *sig_len) {
  if (sig_len == NULL || (data == NULL && len > 0)) {
    kind->end(op);
    return CKR_ARGUMENTS_BAD;
  }
  CK_ULONG need = kind->signature_length(op);
  CK_RV rv;
  if (!pkcs11_output_fits(sig, sig_len, need, &rv)) return rv;
  rv = final ? kind->sign_final(op, sig) : kind->sign(op, data, len, sig);
  if (rv == CKR_OK) *sig_len = need;
  kind->end(op);
  return rv;
}

CK_RV pkcs11_sign(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *data,
                  CK_ULONG len, CK_BYTE *sig, CK_ULONG *sig_len) {
  if (!kind->active(op)) return CKR_OPERATION_NOT_INITIALIZED;
  if (kind->updated(op)) return CKR_OPERATION_ACTIVE; /* a multi-part one ends with Final */
  return sign_out(kind, op, data, len, 0, sig, sig_len);
}

CK_RV pkcs11_sign_final(const pkcs11_operation_kind *kind, pkcs11_operation *op, CK_BYTE *sig,
                        CK_ULONG *sig_len) {
  if (!kind->active(op)) return CKR_OPERATION_NOT_INITIALIZED;
  return sign_out(kind, op, NULL, 0, 1, sig, sig_len);
}

CK_RV pkcs11_update(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *part,
                    CK_ULONG len) {
  if (!kind->active(op)) return CKR_OPERATION_NOT_INITIALIZED;
  CK_RV rv = part == NULL && len > 0 ? CKR_ARGUMENTS_BAD : kind->update(op, part, len);
  if (rv != CKR_OK) kind->end(op);
  return rv;
}

/* Verifies and ends the operation, whatever the outcome. */
static CK_RV verify_now(const pkcs11_operation_kind *kind, pkcs11_operation *op,
                        const CK_BYTE *data, CK_ULONG len, int final, const CK_BYTE *sig,
                        CK_ULONG sig_len) {
  CK_RV rv;
  if ((data == NULL && len > 0) || (sig == NULL && sig_len > 0))
    rv = CKR_ARGUMENTS_BAD;
  else
    rv = final ? kind->verify_final(op, sig, sig_len) : kind->verify(op, data, len, sig, sig_len);
  kind->end(op);
  return rv;
}

CK_RV pkcs11_verify(const pkcs11_operation_kind *kind, pkcs11_operation *op, const CK_BYTE *data,
                    CK_ULONG len, const CK_BYTE *sig, CK_ULONG sig_len) {
  if (!kind->active(op)) return CKR_OPERATION_NOT_INITIALIZED;
  if (kind->updated(op)) return CKR_OPERATION_ACTIVE;
  return verify_now(kind, op, data, len, 0, sig, sig_len);
}

CK_RV pkcs11_verify_final(const pkcs11_operation_kind *kind, pkcs11_operation *op,
                          const CK_BYTE *sig, CK_ULONG sig_len) {
  if (!kind->active(op)) return CKR_OPERATION_NOT_INITIALIZED;
  return verify_now(kind, op, NULL, 0, 1, sig, sig_len);
}
