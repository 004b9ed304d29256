/* svcmod internals shared by the PKCS#11 front end (p11_*.c), the object model (object.c), the
 * token store (store.c) and the configuration reader (config.c). */
#ifndef SVCMOD_H
#define SVCMOD_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "pkcs11.h"
#include "pkcs11_buffer.h"
#include "pkcs11_search.h"

#define SVCMOD_MAX_SESSIONS 128        /* compile-time maximum */
#define SVCMOD_DEFAULT_SESSION_CAP 127 /* one less than the maximum, as the hardware module */
#define SVCMOD_SESSION_RESERVE (24 * 1024)
#define SVCMOD_PBKDF2_ITERATIONS 200000
#define SVCMOD_MAX_FAILED_LOGINS 5
#define SVCMOD_MIN_PIN 4
#define SVCMOD_MAX_PIN 255
#define SVCMOD_SALT_BYTES 16
#define SVCMOD_WRAP_BYTES (32 + 28) /* AES-256-GCM sealed master key */

/* ---- configuration (config.c) ---- */
#define SVCMOD_MAX_HIDDEN 8
typedef struct {
  char tokendir[PATH_MAX];
  unsigned secure_heap_kb; /* 64..8192, default 1024 */
  unsigned session_cap;    /* 1..127, default 127 */
  CK_MECHANISM_TYPE hidden[SVCMOD_MAX_HIDDEN]; /* from $SVCMOD_HIDE_MECHANISMS */
  unsigned nhidden;
} svcmod_config;

/* Reads the file named by $SVCMOD_CONF, then $SVCMOD_HIDE_MECHANISMS; CKR_GENERAL_ERROR (with a
 * line on stderr) when either is malformed, or the file is missing or names no existing token
 * directory. */
CK_RV config_load(svcmod_config *cfg);

/* Whether $SVCMOD_HIDE_MECHANISMS named `type`: the module then behaves as one without it. */
int config_hides(const svcmod_config *cfg, CK_MECHANISM_TYPE type);

/* ---- token state persisted in tokendir/token.db (store.c) ---- */
typedef struct {
  int initialized;
  CK_UTF8CHAR label[32];
  char serial[16];
  uint8_t so_salt[SVCMOD_SALT_BYTES], so_wrap[SVCMOD_WRAP_BYTES];
  unsigned so_fails;
  int user_set;
  uint8_t user_salt[SVCMOD_SALT_BYTES], user_wrap[SVCMOD_WRAP_BYTES];
  unsigned user_fails;
  unsigned long next_id;
} token_state;

/* ---- objects (object.c) ---- */
typedef struct {
  CK_ATTRIBUTE_TYPE type;
  CK_ULONG len;
  uint8_t *val;
} attr_t;

typedef struct object {
  struct object *next;
  CK_OBJECT_HANDLE handle;
  CK_OBJECT_CLASS cls;
  CK_KEY_TYPE ktype;
  int on_token, is_private;
  CK_SESSION_HANDLE owner; /* session objects: the creating session */
  unsigned long file_id;   /* token objects: tokendir/obj-<id>.db */
  attr_t *attrs;           /* what C_GetAttributeValue shows; never key material */
  size_t nattrs;
  uint8_t *secret; /* plaintext key material (see object.c for its layout per key type) */
  size_t secret_len;
  uint8_t *sealed; /* token objects: the key material as stored, AES-GCM under the master key */
  size_t sealed_len;
  int seen; /* mark for store refresh */
} object_t;

/* ---- per-session operation state, kept inside the session's secure-heap reservation ---- */
#define OP_KEY_MAX 5120 /* ML-DSA-87: seed + secret key = 4928 bytes */
#define OP_SIG_MAX 4736 /* ML-DSA-87 signature: 4627 bytes */
#define OP_DATA_MAX (64u << 20)

/* The struct pkcs11_operation.h drives (C_Sign*, C_Verify*, C_VerifySignature*). */
typedef struct pkcs11_operation {
  int active;
  int verify_signature; /* started by C_VerifySignatureInit: the signature is in sig */
  int updated;          /* a multi-part Update has been made */
  CK_MECHANISM_TYPE mech;
  CK_KEY_TYPE ktype;
  int level;         /* ML-DSA: 44, 65 or 87 */
  int deterministic; /* CKH_DETERMINISTIC_REQUIRED */
  size_t ctxlen;
  uint8_t ctx[255];
  size_t keylen;
  uint8_t key[OP_KEY_MAX];
  size_t siglen;
  uint8_t sig[OP_SIG_MAX];
  pkcs11_buffer parts; /* multi-part input, on the ordinary heap: messages are not secret */
} op_t;

struct op_ops {
  op_t sign, verify;
};

/* ---- the module's process-wide state (state.c) ---- */
typedef struct {
  int used, busy;
  CK_SESSION_HANDLE handle;
  CK_FLAGS flags;
  unsigned chunk;       /* index of its reservation in the secure heap */
  struct op_ops *ops;   /* sign/verify state, inside the reservation */
  pkcs11_search search;
  void *digest; /* EVP_MD_CTX * */
} session_t;

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t idle; /* signalled when a session stops being busy */
  int initialized;
  pid_t pid;
  svcmod_config cfg;
  token_state tok;
  long role; /* -1 nobody, CKU_USER, CKU_SO */
  uint8_t master[32];
  object_t *objects;
  CK_OBJECT_HANDLE next_session_object;
  CK_SESSION_HANDLE next_session_handle;
  session_t sessions[SVCMOD_MAX_SESSIONS];
  unsigned nsessions;
  uint8_t *heap;
  size_t heap_bytes;
  unsigned heap_chunks;
  uint8_t chunk_used[SVCMOD_MAX_SESSIONS * 16];
  struct timespec dir_mtime;
} module_state;

extern module_state g;

/* store.c: all callers hold g.lock; cross-process exclusion is a flock on tokendir/.lock */
int store_lock(void);
void store_unlock(int fd);
CK_RV store_read_token(token_state *t);
CK_RV store_write_token(const token_state *t);
CK_RV store_write_object(const object_t *o);
CK_RV store_delete_object(unsigned long id);
CK_RV store_wipe_objects(void);
/* Loads token objects written by other processes and drops deleted ones. */
void store_refresh(int force);

/* object.c */
object_t *object_find(CK_OBJECT_HANDLE h);
int object_visible(const object_t *o);
const attr_t *object_attr(const object_t *o, CK_ATTRIBUTE_TYPE type);
int object_bool(const object_t *o, CK_ATTRIBUTE_TYPE type);
CK_ULONG object_ulong(const object_t *o, CK_ATTRIBUTE_TYPE type);
void object_free(object_t *o);
void object_link(object_t *o);
void object_unlink_free(object_t *o);
/* Decrypts the key material of a loaded token object with the master key (when logged in). */
int object_unlock(object_t *o);
void object_lock(object_t *o);
CK_RV object_get_attributes(const object_t *o, CK_ATTRIBUTE *t, CK_ULONG n);
int object_matches(const object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n);
CK_RV object_seal(object_t *o);
CK_RV object_set_attr(object_t *o, CK_ATTRIBUTE_TYPE type, const void *val, CK_ULONG len);

/* session.c: a session is "busy" while one call on it is running; a second concurrent call on
 * the same handle answers CKR_OPERATION_ACTIVE instead of racing. The *_locked functions are
 * called with g.lock held. */
CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out);
void session_leave(session_t *s);
CK_RV heap_map(void);
void heap_unmap(void);
/* A free 24 KiB reservation of the secure heap, zeroed; -1 when none is left. */
int chunk_alloc(void);
void logout_locked(void);
void session_close_locked(session_t *s);
/* Waits until no call runs on any session, then closes them all. */
void close_all_locked(void);
void op_end(op_t *op);

/* state.c */
CK_RV module_ready(void); /* CKR_OK or CKR_CRYPTOKI_NOT_INITIALIZED; takes no lock */

/* Test hook (fault.c): CKR_OK, or the return value the `faults` file in the token directory
 * injects into this call of `function` (see README.md, "Fault injection"). */
CK_RV fault_injected(const char *function);

/* store.c: reads token.db again into g.tok (counters and initialisation may have been changed by
 * another process); called with g.lock held. */
CK_RV token_reload_locked(void);

/* create.c */
/* 44, 65 or 87 for CKP_ML_DSA_44/65/87; 0 for any other parameter set. */
int level_of_set(CK_ULONG set);
/* Links new objects with handles (and files, for token objects); g.lock held. */
CK_RV object_register(session_t *s, object_t **objs, size_t n, CK_OBJECT_HANDLE *out);
/* The object's key material: a ‖ b. */
CK_RV object_set_secret(object_t *o, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* helpers */
void hex_encode(char *out, const uint8_t *in, size_t n);
int hex_decode_into(const char *hex, size_t hexlen, uint8_t *out);

/* template.c */
const CK_ATTRIBUTE *tmpl_find(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type);
CK_RV tmpl_bool(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type, int def, int *out);
CK_RV tmpl_ulong(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type, CK_ULONG *out,
                 int *present);
/* A new, unlinked object of this class and key type with the template's generic attributes;
 * `extra` lists the type-specific attributes the caller itself handles. genmech is
 * CK_UNAVAILABLE_INFORMATION for objects not generated here. */
CK_RV object_build(CK_OBJECT_CLASS cls, CK_KEY_TYPE kt, CK_MECHANISM_TYPE genmech,
                   const CK_ATTRIBUTE *t, CK_ULONG n, const CK_ATTRIBUTE_TYPE *extra,
                   size_t nextra, object_t **out);
/* A new, unlinked X.509 certificate object (CKO_CERTIFICATE, CKC_X_509) from a C_CreateObject
 * template: CKA_VALUE (the DER, required, at most SVCMOD_CERT_MAX bytes), CKA_SUBJECT, CKA_ISSUER,
 * CKA_SERIAL_NUMBER, CKA_ID and CKA_LABEL as given. Its content is not parsed: what a certificate
 * says is for its users to check. */
#define SVCMOD_CERT_MAX (64 * 1024)
CK_RV certificate_build(const CK_ATTRIBUTE *t, CK_ULONG n, object_t **out);
/* CKA_EC_PARAMS naming P-256 (its OID), or Ed25519 (its OID or the printable "edwards25519"). */
int tmpl_is_p256_params(const CK_ATTRIBUTE *a);
int tmpl_is_ed25519_params(const CK_ATTRIBUTE *a);

#endif
