/* The svcd PKCS#11 client module's internal declarations: endpoints (one slot each), the keys a
 * slot's /token lists, the HTTP calls, how a mechanism is carried out, and the error mapping. */
#ifndef SVCP11_CLIENT_H
#define SVCP11_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pkcs11.h"

#define SVCP11_MAX_ENDPOINTS 16
#define SVCP11_DEFAULT_TIMEOUT_MS 30000L
#define SVCP11_DEFAULT_MAX_BODY (1024UL * 1024UL)
/* How long a fetched /token stays current before C_OpenSession fetches it again. */
#define SVCP11_TOKEN_TTL_MS 5000L
/* 429/503 answers retried after their Retry-After at most this many times, within the timeout. */
#define SVCP11_MAX_RETRIES 3

/* ---- debug output (only when SVCD_PKCS11_DEBUG is set) ----------------------------------------- */
void debug_init(void);
void debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- configuration ------------------------------------------------------------------------------ */
typedef struct {
  char url[512];  /* https://host:port, no trailing slash */
  char cacert[512];
  char cert[512];
  char key[512];
  char label[33]; /* token label override; empty: the daemon's token label */
  long timeout_ms;
  unsigned long max_body;
  int max_body_set;   /* max_body was configured: it may only lower the daemon's stated limit */
  unsigned key_types; /* bit (1 << key_type) per type the slot shows; 0: every type */
} endpoint_config;

typedef struct {
  endpoint_config ep[SVCP11_MAX_ENDPOINTS];
  unsigned count;
} client_config;

/* Reads SVCD_PKCS11_CONF when set, else the SVCD_ADDR family. On failure writes why to `why`. */
CK_RV config_load(client_config *cfg, char *why, size_t why_len);
/* Parses a configuration file's text (exposed for the unit tests). */
CK_RV config_parse(const char *text, client_config *cfg, char *why, size_t why_len);

/* ---- HTTP through libcurl ----------------------------------------------------------------------- */
typedef struct http_pool http_pool;

typedef struct {
  long status;
  unsigned char *body;
  size_t len;
  long retry_after; /* seconds; -1 when absent */
} http_answer;

http_pool *http_pool_new(const endpoint_config *ep);
/* Frees the pool; `abandon` leaves the connections as they are (a forked child must not close the
 * parent's TLS sessions). */
void http_pool_free(http_pool *p, int abandon);
/* One request (429/503 retried after Retry-After, bounded by the endpoint's timeout). Header lines
 * in `headers` are "Name: value". A transport failure is returned as its CKR_*. */
CK_RV http_call(http_pool *p, const char *method, const char *path, const char *const *headers,
                const unsigned char *body, size_t len, http_answer *out);
void http_answer_free(http_answer *a);
/* The CKR_* for an HTTP status on a route ("sign", "verify", "token"). */
CK_RV status_to_rv(long status, const char *route);

/* ---- keys from /token -------------------------------------------------------------------------- */
typedef enum {
  KT_EC_P256,
  KT_EC_P384,
  KT_ED25519,
  KT_RSA_3072,
  KT_ML_DSA_44,
  KT_ML_DSA_65,
  KT_ML_DSA_87,
  KT_COMPOSITE,
  KT_UNKNOWN
} key_type;

enum { DG_SHA256 = 1, DG_SHA384 = 2, DG_SHA512 = 4, DG_MLDSA_MU = 8 };

typedef struct {
  char *label;
  key_type type;
  unsigned digests; /* DG_* the daemon takes for this key in digest mode */
  int gone;         /* listed once, absent from the latest /token: its handles answer invalid */
  unsigned char *raw;
  size_t raw_len;
  unsigned char *spki;
  size_t spki_len;
  unsigned char id[20]; /* CKA_ID: SHA-1 of the raw public key */
  void *pkey;           /* EVP_PKEY for local verification (EC, RSA, Ed25519), else NULL */
  unsigned char *ec_point; /* CKA_EC_POINT: DER OCTET STRING of the point (EC, Ed25519) */
  size_t ec_point_len;
  unsigned char *modulus, *exponent; /* RSA, big-endian */
  size_t modulus_len, exponent_len;
} remote_key;

/* Keys are allocated one by one and never move: a handle or an operation holds a pointer. */
typedef struct {
  remote_key **keys;
  size_t count;
  char token_label[33];
  char serial[17];
  int has_digests_field; /* the daemon's /token names "digests": it has digest mode */
  unsigned long max_body; /* the daemon's --max-body as /token states it; 0: not stated */
} token_listing;

/* Parses /token's JSON into `out` (exposed for the unit tests). */
CK_RV token_parse(const char *json, size_t len, token_listing *out);
void token_listing_free(token_listing *t);
void key_free(remote_key *k);
/* CKA_EC_PARAMS of the key type (DER), or NULL. */
const unsigned char *key_ec_params(key_type t, size_t *len);
key_type key_type_from_name(const char *name);
/* Signature length of the key type (ML-DSA and composite fixed; RSA from the modulus). */
size_t key_signature_length(const remote_key *k);

/* ---- mechanisms -------------------------------------------------------------------------------- */
typedef enum { MODE_NONE, MODE_MESSAGE, MODE_DIGEST } sign_mode;

typedef struct {
  sign_mode mode;
  const char *digest;  /* the X-SVC-Digest name in digest mode */
  int hash_nid;        /* NID of the local hash for hash-and-sign mechanisms; 0: input is the digest */
  int raw_digest;      /* input is already the digest (CKM_ECDSA, CKM_RSA_PKCS_PSS) */
  int mu;              /* ML-DSA: μ computed here for multi-part */
  size_t digest_len;   /* expected input length for raw digests (0: any of 32/48/64) */
} sign_plan;

/* How `mech` signs with `k`, or a CKR_* why not. `multipart` is unknown at init; the plan covers
 * both (mu says μ may be used). */
CK_RV mech_plan(const remote_key *k, const CK_MECHANISM *mech, sign_plan *plan);
/* Mechanisms offered for the keys in `t` (the truth: at least one key signs with each). */
size_t mech_list(const token_listing *t, CK_MECHANISM_TYPE *out, size_t cap);
CK_RV mech_info(const token_listing *t, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO *info);
/* The key type may use `type` at all (CKA_ALLOWED_MECHANISMS, C_SignInit's key check). */
int mech_allowed(const remote_key *k, CK_MECHANISM_TYPE type);
size_t mech_allowed_list(const remote_key *k, CK_MECHANISM_TYPE *out, size_t cap);

/* ---- local verification ------------------------------------------------------------------------ */
/* Verifies `sig` with the key's public key: over the digest `data` made with `md_nid` (EC, RSA-PSS
 * with MGF1 of that hash and a salt of its length), or over the message `data` (Ed25519).
 * CKR_SIGNATURE_INVALID when it does not verify. */
CK_RV verify_local(const remote_key *k, int md_nid, const unsigned char *data, size_t len,
                   const unsigned char *sig, size_t sig_len);
int verify_local_possible(const remote_key *k);
void *pkey_from_spki(const unsigned char *spki, size_t len);
void pkey_free(void *pkey);

#endif
