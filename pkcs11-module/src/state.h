/* The module's state: slots (one per endpoint) and sessions, and the signing and verifying
 * operations a session carries. */
#ifndef SVCP11_STATE_H
#define SVCP11_STATE_H

#include <openssl/evp.h>
#include <sys/types.h>

#include "client.h"

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

/* How an operation takes its data: all at once, hashed as it comes, or buffered. */
typedef enum { ACC_NONE, ACC_HASH, ACC_MU, ACC_BUFFER } accumulate_kind;

typedef struct {
  int active;
  remote_key *key;
  slot_t *slot;
  sign_plan plan;
  accumulate_kind acc;
  EVP_MD_CTX *md;
  unsigned char *buf;
  size_t len, cap, limit;
} operation;

typedef struct session {
  struct session *next;
  CK_SESSION_HANDLE handle;
  unsigned slot;
  CK_FLAGS flags;
  int busy;
  int finding;
  CK_OBJECT_HANDLE *found;
  size_t nfound, pos;
  operation sign, verify;
} session_t;

typedef struct {
  pthread_rwlock_t life;
  pthread_mutex_t lock; /* sessions and login state */
  int initialized;
  pid_t pid;
  slot_t *slots;
  unsigned nslots;
  session_t *sessions;
  CK_SESSION_HANDLE next_handle;
  int logged_in;
} module_state;

extern module_state g;

long now_ms(void);
CK_RV enter(void);
void leave(void);
CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out);
void session_leave(session_t *s);
void session_free(session_t *s);
slot_t *slot_by_id(CK_SLOT_ID id);
CK_RV slot_refresh(slot_t *s, long max_age_ms);
token_listing slot_view(slot_t *s);

#endif
