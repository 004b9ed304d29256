/* The slots: one per configured endpoint, each with one token, the keys its /token lists. A
 * listing is fetched at the first need and again when older than SVCP11_TOKEN_TTL_MS at
 * C_OpenSession; a label keeps its index (and so its object handles) for the life of the
 * C_Initialize. */
#ifndef SVCP11_SLOT_H
#define SVCP11_SLOT_H

#include <pthread.h>
#include <stddef.h>

#include "config.h"
#include "http.h"
#include "keys.h"
#include "pkcs11.h"

/* How long a fetched /token stays current before C_OpenSession fetches it again. */
#define SVCP11_TOKEN_TTL_MS 5000L
/* CK_INFO's, CK_SLOT_INFO's and CK_TOKEN_INFO's manufacturerID. */
#define SVCP11_MANUFACTURER "svcd project"

typedef struct {
  endpoint_config cfg;
  http_pool *http;
  pthread_mutex_t lock; /* guards everything below */
  remote_key **keys;    /* index = object handle's key part; never reordered */
  size_t nkeys;
  remote_key **retired; /* replaced keys an operation may still hold; freed at C_Finalize */
  size_t nretired;
  long fetched_at; /* ms (monotonic); 0: never */
  char token_label[33];
  char serial[17];
  int has_digests_field;
  unsigned long stated_max_body; /* the daemon's --max-body from /token (atomic); 0: not stated */
} slot_t;

/* One slot per endpoint of `cfg`, each with its connection pool; nothing fetched yet. */
CK_RV slots_create(const client_config *cfg);
/* Frees every slot; `abandon` leaves their connections as they are (a forked child). */
void slots_free(int abandon);
/* In a forked child: the inherited slot locks may be held by threads that do not exist there. */
void slots_reset_locks(void);
unsigned slot_count(void);
/* C_GetSlotList's answer: every slot id (each slot has its token, the remote one). */
CK_RV slots_list(CK_SLOT_ID *list, CK_ULONG *count);
/* The slot, or NULL for an id no slot has. */
slot_t *slot_by_id(CK_SLOT_ID id);
/* GET /token, when never fetched or older than `max_age_ms` (-1: only when never fetched). A failed
 * refresh keeps a listing fetched before. */
CK_RV slot_refresh(slot_t *s, long max_age_ms);
/* A view of the slot's keys for the mechanism functions; the caller holds the slot's lock. */
token_listing slot_view(slot_t *s);
void slot_info(const slot_t *s, CK_SLOT_INFO *info);
/* The token's description; the caller has refreshed the slot. */
void slot_token_info(slot_t *s, CK_TOKEN_INFO *info);
/* C_GetMechanismList's answer over the slot's keys (the two-call convention on `list`). */
CK_RV slot_mechanisms(slot_t *s, CK_MECHANISM_TYPE *list, CK_ULONG *count);
CK_RV slot_mechanism_info(slot_t *s, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);
/* The most message bytes one request may carry: the daemon's --max-body as /token states it
 * (lowered by a configured max_body, e.g. a proxy's smaller limit), else the configured one. */
unsigned long slot_body_limit(const slot_t *s);

#endif
