#include "pkcs11_search.h"

#include <stdlib.h>

CK_RV pkcs11_search_start(pkcs11_search *s, size_t cap) {
  *s = (pkcs11_search){.found = malloc((cap ? cap : 1) * sizeof *s->found), .cap = cap};
  if (s->found == NULL) return CKR_HOST_MEMORY;
  s->active = 1;
  return CKR_OK;
}

void pkcs11_search_add(pkcs11_search *s, CK_OBJECT_HANDLE h) {
  if (s->count < s->cap) s->found[s->count++] = h;
}

CK_RV pkcs11_search_next(pkcs11_search *s, CK_OBJECT_HANDLE *out, CK_ULONG max, CK_ULONG *count) {
  if (!s->active) return CKR_OPERATION_NOT_INITIALIZED;
  if (count == NULL || (out == NULL && max > 0)) return CKR_ARGUMENTS_BAD;
  CK_ULONG n = 0;
  while (n < max && s->next < s->count) out[n++] = s->found[s->next++];
  *count = n;
  return CKR_OK;
}

CK_RV pkcs11_search_end(pkcs11_search *s) {
  CK_RV rv = s->active ? CKR_OK : CKR_OPERATION_NOT_INITIALIZED;
  free(s->found);
  *s = (pkcs11_search){0};
  return rv;
}
