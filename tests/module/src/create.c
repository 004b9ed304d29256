/* Creating objects (C_CreateObject, C_GenerateKey, C_GenerateKeyPair): the checks a new object
 * passes, its key material, its handle, and for a token object its file. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "svcmod.h"

int level_of_set(CK_ULONG set) {
  return set == CKP_ML_DSA_44 ? 44 : set == CKP_ML_DSA_65 ? 65 : set == CKP_ML_DSA_87 ? 87 : 0;
}

static CK_RV may_create(const session_t *s, int token, int priv) {
  if (token && !(s->flags & CKF_RW_SESSION)) return CKR_SESSION_READ_ONLY;
  if (priv && g.role != (long)CKU_USER) return CKR_USER_NOT_LOGGED_IN;
  return CKR_OK;
}

/* Gives the objects handles and, for token objects, file ids and files (key material sealed under
 * the master key). Called with g.lock held; on failure nothing is linked and nothing stays on
 * disk, and the caller still owns the objects. */
CK_RV object_register(session_t *s, object_t **objs, size_t n, CK_OBJECT_HANDLE *out) {
  CK_RV rv = CKR_OK;
  size_t ntoken = 0;
  for (size_t i = 0; i < n && rv == CKR_OK; i++) {
    rv = may_create(s, objs[i]->on_token, objs[i]->is_private);
    ntoken += objs[i]->on_token;
  }
  if (rv != CKR_OK) return rv;
  if (ntoken > 0) {
    int fd = store_lock();
    token_state t;
    rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
    if (rv == CKR_OK && !t.initialized) rv = CKR_TOKEN_NOT_INITIALIZED;
    if (rv == CKR_OK) {
      for (size_t i = 0; i < n; i++)
        if (objs[i]->on_token) objs[i]->file_id = objs[i]->handle = t.next_id++;
      rv = store_write_token(&t);
    }
    size_t written = 0;
    for (size_t i = 0; i < n && rv == CKR_OK; i++) {
      if (!objs[i]->on_token) continue;
      if (objs[i]->secret) rv = object_seal(objs[i]);
      if (rv == CKR_OK) rv = store_write_object(objs[i]);
      if (rv == CKR_OK) written = i + 1;
    }
    if (rv != CKR_OK)
      for (size_t i = 0; i < written; i++)
        if (objs[i]->on_token) store_delete_object(objs[i]->file_id);
    OPENSSL_cleanse(&t, sizeof t);
    store_unlock(fd);
    if (rv != CKR_OK) return rv;
  }
  for (size_t i = 0; i < n; i++) {
    if (!objs[i]->on_token) {
      objs[i]->handle = g.next_session_object++;
      objs[i]->owner = s->handle;
    }
    object_link(objs[i]);
    out[i] = objs[i]->handle;
  }
  return CKR_OK;
}

CK_RV object_set_secret(object_t *o, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  o->secret = malloc(alen + blen);
  if (o->secret == NULL) return CKR_HOST_MEMORY;
  memcpy(o->secret, a, alen);
  if (blen) memcpy(o->secret + alen, b, blen);
  o->secret_len = alen + blen;
  return CKR_OK;
}

/* Reads token.db again: counters and initialisation may have been changed by another process. */
