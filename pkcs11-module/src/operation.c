#include "operation.h"

#include <openssl/obj_mac.h>
#include <pthread.h>
#include <string.h>

#include "object.h"
#include "remote.h"
#include "verify.h"

/* ---- starting ------------------------------------------------------------------------------------- */

CK_RV operation_init(operation *op, CK_SLOT_ID slot_id, const CK_MECHANISM *mech,
                     CK_OBJECT_HANDLE key, int signing) {
  if (op->active) return CKR_OPERATION_ACTIVE;
  object_kind kind;
  remote_key *k = object_key(slot_id, key, &kind);
  if (k == NULL || kind == OBJ_CERTIFICATE) return CKR_KEY_HANDLE_INVALID; /* not a key */
  if (signing && kind != OBJ_PRIVATE_KEY) return CKR_KEY_FUNCTION_NOT_PERMITTED;
  slot_t *slot = slot_by_id(slot_id);
  sign_plan plan;
  pthread_mutex_lock(&slot->lock);
  CK_RV rv = mech_plan(k, mech, &plan);
  pthread_mutex_unlock(&slot->lock);
  /* A mechanism no key here signs with is invalid; one for other key types is inconsistent. */
  CK_MECHANISM_INFO info;
  if (rv == CKR_KEY_TYPE_INCONSISTENT && slot_mechanism_info(slot, mech->mechanism, &info) != CKR_OK)
    rv = CKR_MECHANISM_INVALID;
  if (rv != CKR_OK) return rv;
  memset(op, 0, sizeof *op);
  op->active = 1;
  op->verifying = !signing;
  op->key = k;
  op->slot = slot;
  op->plan = plan;
  return CKR_OK;
}

void operation_end(operation *op) {
  EVP_MD_CTX_free(op->md);
  pkcs11_buffer_free(&op->buf);
  memset(op, 0, sizeof *op);
}

/* ---- taking the data -------------------------------------------------------------------------------- */

/* ML-DSA's μ with an empty context: SHAKE256(SHAKE256(pk, 64) ‖ 0x00 ‖ 0x00 ‖ M, 64). This starts
 * it; the message follows as it comes. */
static CK_RV mu_start(operation *op) {
  unsigned char tr[64];
  const unsigned char prefix[2] = {0, 0};
  EVP_MD_CTX *t = EVP_MD_CTX_new();
  int ok = t != NULL && EVP_DigestInit_ex(t, EVP_shake256(), NULL) == 1 &&
           EVP_DigestUpdate(t, op->key->raw, op->key->raw_len) == 1 &&
           EVP_DigestFinalXOF(t, tr, sizeof tr) == 1;
  EVP_MD_CTX_free(t);
  op->md = ok ? EVP_MD_CTX_new() : NULL;
  if (op->md == NULL || EVP_DigestInit_ex(op->md, EVP_shake256(), NULL) != 1 ||
      EVP_DigestUpdate(op->md, tr, sizeof tr) != 1 ||
      EVP_DigestUpdate(op->md, prefix, sizeof prefix) != 1)
    return CKR_HOST_MEMORY;
  return CKR_OK;
}

/* Decides how the data is taken: `total` is its length when given all at once, else 0. */
static CK_RV acc_start(operation *op, int multipart, size_t total) {
  const sign_plan *p = &op->plan;
  unsigned long max_body = slot_body_limit(op->slot);
  op->acc = ACC_BUFFER;
  op->limit = max_body;
  if (p->raw_digest) {
    op->limit = 64;
  } else if (op->verifying && key_type_verified_here(op->key->type)) {
    op->acc = p->hash_nid != 0 ? ACC_HASH : ACC_BUFFER;
    op->limit = (size_t)1 << 30; /* Ed25519 verified here: the message is never sent */
  } else if (p->mode == MODE_DIGEST && p->hash_nid != 0) {
    op->acc = ACC_HASH;
  } else if (p->mu && (multipart || total > max_body)) {
    op->acc = ACC_MU;
  }
  if (op->acc == ACC_MU) return mu_start(op);
  if (op->acc == ACC_HASH) {
    op->md = EVP_MD_CTX_new();
    if (op->md == NULL || EVP_DigestInit_ex(op->md, EVP_get_digestbynid(p->hash_nid), NULL) != 1)
      return CKR_HOST_MEMORY;
  }
  return CKR_OK;
}

static CK_RV acc_add(operation *op, const unsigned char *data, size_t len) {
  if (op->acc == ACC_HASH || op->acc == ACC_MU)
    return EVP_DigestUpdate(op->md, data, len) == 1 ? CKR_OK : CKR_FUNCTION_FAILED;
  /* more than the service takes: CKR_DATA_LEN_RANGE */
  return pkcs11_buffer_append(&op->buf, data, len, op->limit);
}

static CK_RV raw_digest_name(const operation *op, size_t len, payload *out) {
  const sign_plan *p = &op->plan;
  if (p->digest_len != 0) { /* RSA-PSS: the parameters named the hash */
    if (len != p->digest_len) return CKR_DATA_LEN_RANGE;
    out->digest = p->digest;
    out->md_nid = p->hash_nid;
    return CKR_OK;
  }
  unsigned flag = len == 32 ? DG_SHA256 : len == 48 ? DG_SHA384 : len == 64 ? DG_SHA512 : 0;
  if (flag == 0 || !(op->key->digests & flag)) return CKR_DATA_LEN_RANGE;
  out->digest = len == 32 ? "sha-256" : len == 48 ? "sha-384" : "sha-512";
  out->md_nid = len == 32 ? NID_sha256 : len == 48 ? NID_sha384 : NID_sha512;
  return CKR_OK;
}

static CK_RV acc_finish(operation *op, payload *out) {
  memset(out, 0, sizeof *out);
  if (op->acc == ACC_HASH) {
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(op->md, out->dg, &n) != 1) return CKR_FUNCTION_FAILED;
    out->digest = op->plan.digest;
    out->md_nid = op->plan.hash_nid;
    out->len = n;
    return CKR_OK;
  }
  if (op->acc == ACC_MU) {
    if (EVP_DigestFinalXOF(op->md, out->dg, 64) != 1) return CKR_FUNCTION_FAILED;
    out->digest = "ml-dsa-mu";
    out->len = 64;
    return CKR_OK;
  }
  out->data = op->buf.data != NULL ? op->buf.data : (const unsigned char *)"";
  out->len = op->buf.len;
  if (op->plan.raw_digest) return raw_digest_name(op, op->buf.len, out);
  return CKR_OK;
}

/* ---- ending: the daemon signs; libcrypto or the daemon verifies ---------------------------------- */

static CK_RV sign_taken(operation *op, CK_BYTE *sig) {
  payload p;
  CK_RV rv = acc_finish(op, &p);
  if (rv != CKR_OK) return rv;
  return remote_sign(op->slot->http, op->key->label, &p, sig, key_signature_length(op->key));
}

static CK_RV verify_taken(operation *op, const CK_BYTE *sig, CK_ULONG sig_len) {
  payload p;
  CK_RV rv = acc_finish(op, &p);
  if (rv != CKR_OK) return rv;
  if (sig_len != key_signature_length(op->key)) return CKR_SIGNATURE_LEN_RANGE;
  if (key_type_verified_here(op->key->type))
    return verify_local(op->key, p.md_nid, payload_bytes(&p), p.len, sig, sig_len);
  return remote_verify(op->slot->http, op->key->label, &p, sig, sig_len);
}

/* ---- the operation as pkcs11_operation.h drives it ---------------------------------------------- */

static int op_active(const operation *op) { return op->active; }

static int op_updated(const operation *op) { return op->acc != ACC_NONE; }

static CK_ULONG op_signature_length(const operation *op) { return key_signature_length(op->key); }

static CK_RV op_update(operation *op, const CK_BYTE *part, CK_ULONG len) {
  CK_RV rv = op->acc == ACC_NONE ? acc_start(op, 1, 0) : CKR_OK;
  return rv == CKR_OK ? acc_add(op, part, len) : rv;
}

/* A single-part call: the whole data at once. */
static CK_RV take_whole(operation *op, const CK_BYTE *data, CK_ULONG len) {
  CK_RV rv = acc_start(op, 0, len);
  return rv == CKR_OK ? acc_add(op, data, len) : rv;
}

/* A Final with no Update before it: a multi-part operation of no parts. */
static CK_RV take_rest(operation *op) { return op->acc == ACC_NONE ? acc_start(op, 1, 0) : CKR_OK; }

static CK_RV op_sign(operation *op, const CK_BYTE *data, CK_ULONG len, CK_BYTE *sig) {
  CK_RV rv = take_whole(op, data, len);
  return rv == CKR_OK ? sign_taken(op, sig) : rv;
}

static CK_RV op_sign_final(operation *op, CK_BYTE *sig) {
  CK_RV rv = take_rest(op);
  return rv == CKR_OK ? sign_taken(op, sig) : rv;
}

static CK_RV op_verify(operation *op, const CK_BYTE *data, CK_ULONG len, const CK_BYTE *sig,
                       CK_ULONG sig_len) {
  CK_RV rv = take_whole(op, data, len);
  return rv == CKR_OK ? verify_taken(op, sig, sig_len) : rv;
}

static CK_RV op_verify_final(operation *op, const CK_BYTE *sig, CK_ULONG sig_len) {
  CK_RV rv = take_rest(op);
  return rv == CKR_OK ? verify_taken(op, sig, sig_len) : rv;
}

const pkcs11_operation_kind operation_kind = {
    .active = op_active,
    .updated = op_updated,
    .signature_length = op_signature_length,
    .update = op_update,
    .sign = op_sign,
    .sign_final = op_sign_final,
    .verify = op_verify,
    .verify_final = op_verify_final,
    .end = operation_end,
};
