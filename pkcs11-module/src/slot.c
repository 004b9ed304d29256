#include "slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "debug.h"
#include "mech.h"
#include "pkcs11_padded.h"

static slot_t *slots;
static unsigned nslots;

CK_RV slots_create(const client_config *cfg) {
  slots = calloc(cfg->count, sizeof *slots);
  if (slots == NULL) return CKR_HOST_MEMORY;
  nslots = cfg->count;
  for (unsigned i = 0; i < cfg->count; i++) {
    slot_t *s = &slots[i];
    s->cfg = cfg->ep[i];
    pthread_mutex_init(&s->lock, NULL);
    s->http = http_pool_new(&s->cfg);
    if (s->http == NULL) return CKR_HOST_MEMORY;
  }
  return CKR_OK;
}

void slots_free(int abandon) {
  for (unsigned i = 0; i < nslots; i++) {
    slot_t *s = &slots[i];
    http_pool_free(s->http, abandon);
    for (size_t k = 0; k < s->nkeys; k++) key_free(s->keys[k]);
    for (size_t k = 0; k < s->nretired; k++) key_free(s->retired[k]);
    free(s->keys);
    free(s->retired);
  }
  free(slots);
  slots = NULL;
  nslots = 0;
}

void slots_reset_locks(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  for (unsigned i = 0; i < nslots; i++) memcpy(&slots[i].lock, &fresh, sizeof fresh);
}

unsigned slot_count(void) { return nslots; }

CK_RV slots_list(CK_SLOT_ID *list, CK_ULONG *count) {
  CK_RV rv = CKR_OK;
  if (list != NULL && *count < nslots)
    rv = CKR_BUFFER_TOO_SMALL;
  else if (list != NULL)
    for (unsigned i = 0; i < nslots; i++) list[i] = i;
  *count = nslots;
  return rv;
}

slot_t *slot_by_id(CK_SLOT_ID id) { return id < nslots ? &slots[id] : NULL; }

static int append_key(remote_key ***arr, size_t *n, remote_key *k) {
  remote_key **grown = realloc(*arr, (*n + 1) * sizeof *grown);
  if (grown == NULL) return -1;
  grown[(*n)++] = k;
  *arr = grown;
  return 0;
}

/* Merges a fresh listing: a label keeps its index (and so its handles); a replaced key, or one whose
 * certificate came, went or was renewed, is retired, not freed, since an operation or an attribute
 * read may still hold it; a label no longer listed is marked gone. */
static CK_RV slot_merge(slot_t *s, token_listing *fresh) {
  for (size_t i = 0; i < s->nkeys; i++) s->keys[i]->gone = 1;
  for (size_t j = 0; j < fresh->count; j++) {
    remote_key *k = fresh->keys[j];
    if (s->cfg.key_types != 0 && !(s->cfg.key_types & (1u << k->type))) continue;
    fresh->keys[j] = NULL;
    size_t i = 0;
    while (i < s->nkeys && strcmp(s->keys[i]->label, k->label) != 0) i++;
    if (i < s->nkeys && key_same(s->keys[i], k) && key_cert_same(s->keys[i], k)) {
      s->keys[i]->digests = k->digests;
      s->keys[i]->gone = 0;
      key_free(k);
    } else if (i < s->nkeys) {
      if (append_key(&s->retired, &s->nretired, s->keys[i]) != 0) return CKR_HOST_MEMORY;
      s->keys[i] = k;
    } else if (append_key(&s->keys, &s->nkeys, k) != 0) {
      key_free(k);
      return CKR_HOST_MEMORY;
    }
  }
  snprintf(s->token_label, sizeof s->token_label, "%s", fresh->token_label);
  snprintf(s->serial, sizeof s->serial, "%s", fresh->serial);
  s->has_digests_field = fresh->has_digests_field;
  __atomic_store_n(&s->stated_max_body, fresh->max_body, __ATOMIC_RELAXED);
  return CKR_OK;
}

CK_RV slot_refresh(slot_t *s, long max_age_ms) {
  pthread_mutex_lock(&s->lock);
  int fresh_enough = s->fetched_at != 0 && (max_age_ms < 0 || now_ms() - s->fetched_at < max_age_ms);
  int had = s->fetched_at != 0;
  pthread_mutex_unlock(&s->lock);
  if (fresh_enough) return CKR_OK;
  http_answer a;
  CK_RV rv = http_call(s->http, "GET", "/token", NULL, NULL, 0, &a);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "token");
  token_listing t = {0};
  if (rv == CKR_OK) rv = token_parse((const char *)a.body, a.len, &t);
  http_answer_free(&a);
  pthread_mutex_lock(&s->lock);
  if (rv == CKR_OK) {
    rv = slot_merge(s, &t);
    s->fetched_at = now_ms();
  }
  pthread_mutex_unlock(&s->lock);
  token_listing_free(&t);
  if (rv != CKR_OK && had) {
    debug_log("GET /token failed (0x%lx): keeping the keys listed before", rv);
    return CKR_OK;
  }
  return rv;
}

token_listing slot_view(slot_t *s) {
  token_listing t = {.keys = s->keys, .count = s->nkeys};
  return t;
}

void slot_info(const slot_t *s, CK_SLOT_INFO *info) {
  memset(info, 0, sizeof *info);
  pkcs11_pad(info->slotDescription, 64, s->cfg.url);
  pkcs11_pad(info->manufacturerID, 32, SVCP11_MANUFACTURER);
  info->flags = CKF_TOKEN_PRESENT;
  info->hardwareVersion = info->firmwareVersion = (CK_VERSION){1, 0};
}

void slot_token_info(slot_t *s, CK_TOKEN_INFO *info) {
  memset(info, 0, sizeof *info);
  pthread_mutex_lock(&s->lock);
  pkcs11_pad(info->label, 32,
             s->cfg.label[0] ? s->cfg.label : s->token_label[0] ? s->token_label : "svcd");
  pkcs11_pad(info->serialNumber, 16, s->serial);
  pthread_mutex_unlock(&s->lock);
  pkcs11_pad(info->manufacturerID, 32, SVCP11_MANUFACTURER);
  pkcs11_pad(info->model, 16, "svcd remote");
  /* No CKF_LOGIN_REQUIRED: the TLS client certificate is the credential, and no PIN exists. */
  info->flags = CKF_TOKEN_INITIALIZED | CKF_USER_PIN_INITIALIZED;
  info->ulMaxSessionCount = info->ulMaxRwSessionCount = CK_EFFECTIVELY_INFINITE;
  info->ulSessionCount = info->ulRwSessionCount = CK_UNAVAILABLE_INFORMATION;
  info->ulMaxPinLen = 255;
  info->ulMinPinLen = 0;
  info->ulTotalPublicMemory = info->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
  info->ulTotalPrivateMemory = info->ulFreePrivateMemory = CK_UNAVAILABLE_INFORMATION;
  info->hardwareVersion = info->firmwareVersion = (CK_VERSION){1, 0};
  memset(info->utcTime, ' ', sizeof info->utcTime);
}

CK_RV slot_mechanisms(slot_t *s, CK_MECHANISM_TYPE *list, CK_ULONG *count) {
  pthread_mutex_lock(&s->lock);
  token_listing view = slot_view(s);
  size_t n = mech_list(&view, list, list != NULL ? *count : 0);
  pthread_mutex_unlock(&s->lock);
  CK_RV rv = list != NULL && n > *count ? CKR_BUFFER_TOO_SMALL : CKR_OK;
  *count = n;
  return rv;
}

CK_RV slot_mechanism_info(slot_t *s, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info) {
  pthread_mutex_lock(&s->lock);
  token_listing view = slot_view(s);
  CK_RV rv = mech_info(&view, type, info);
  pthread_mutex_unlock(&s->lock);
  return rv;
}

unsigned long slot_body_limit(const slot_t *s) {
  unsigned long stated = __atomic_load_n(&s->stated_max_body, __ATOMIC_RELAXED);
  if (stated == 0) return s->cfg.max_body;
  return s->cfg.max_body_set && s->cfg.max_body < stated ? s->cfg.max_body : stated;
}
