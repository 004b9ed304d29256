/* PINs and login: C_InitToken, C_InitPIN, C_SetPIN, C_Login, C_Logout. Every PIN is checked by
 * deriving its key (PBKDF2, 200 000 iterations) and unsealing the token's master key with it;
 * failures are counted in token.db, across processes. */
#include <openssl/crypto.h>
#include <string.h>

#include "crypto.h"
#include "pkcs11_functions.h"
#include "svcmod.h"

static const char *const PIN_AAD_USER = "svcmod-user-pin";
static const char *const PIN_AAD_SO = "svcmod-so-pin";

static int pin_len_ok(CK_ULONG len) { return len >= SVCMOD_MIN_PIN && len <= SVCMOD_MAX_PIN; }

/* The slow part of every login: PBKDF2-HMAC-SHA256, 200 000 iterations, then the GCM tag of the
 * sealed master key decides whether the PIN was right. Runs without the module lock. */
static int pin_unwrap(const CK_UTF8CHAR *pin, CK_ULONG len, const uint8_t salt[16],
                      const uint8_t wrap[SVCMOD_WRAP_BYTES], const char *aad, uint8_t master[32]) {
  uint8_t key[32];
  int ok = pbkdf2_sha256(pin, len, salt, SVCMOD_SALT_BYTES, SVCMOD_PBKDF2_ITERATIONS, key) == 0 &&
           unseal(key, (const uint8_t *)aad, strlen(aad), wrap, SVCMOD_WRAP_BYTES, master) == 0;
  OPENSSL_cleanse(key, sizeof key);
  return ok;
}

static CK_RV pin_wrap(const CK_UTF8CHAR *pin, CK_ULONG len, const uint8_t master[32],
                      const char *aad, uint8_t salt[16], uint8_t wrap[SVCMOD_WRAP_BYTES]) {
  uint8_t key[32];
  CK_RV rv = random_bytes(salt, SVCMOD_SALT_BYTES) == 0 &&
                     pbkdf2_sha256(pin, len, salt, SVCMOD_SALT_BYTES, SVCMOD_PBKDF2_ITERATIONS,
                                   key) == 0 &&
                     seal(key, (const uint8_t *)aad, strlen(aad), master, 32, wrap) == 0
                 ? CKR_OK
                 : CKR_FUNCTION_FAILED;
  OPENSSL_cleanse(key, sizeof key);
  return rv;
}

/* Records a login attempt in token.db under the cross-process lock. Returns the failure count
 * after the update, or -1 when the file could not be written. */
static int record_attempt(CK_USER_TYPE who, int success, token_state *fresh) {
  int fd = store_lock();
  if (fd < 0) return -1;
  int fails = -1;
  if (store_read_token(fresh) == CKR_OK && fresh->initialized) {
    unsigned *counter = who == CKU_SO ? &fresh->so_fails : &fresh->user_fails;
    unsigned before = *counter;
    *counter = success ? 0 : before + 1;
    if (*counter == before || store_write_token(fresh) == CKR_OK) fails = (int)*counter;
  }
  store_unlock(fd);
  return fails;
}

/* Verifies a PIN of `who` against the current token.db, counting the attempt. On success the
 * master key is in `master`. */
static CK_RV check_pin(CK_USER_TYPE who, const CK_UTF8CHAR *pin, CK_ULONG len, uint8_t master[32],
                       token_state *fresh) {
  token_state t;
  int fd = store_lock();
  CK_RV rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
  store_unlock(fd);
  if (rv != CKR_OK) return rv;
  if (!t.initialized) return CKR_TOKEN_NOT_INITIALIZED;
  if (who == CKU_USER && !t.user_set) return CKR_USER_PIN_NOT_INITIALIZED;
  unsigned fails = who == CKU_SO ? t.so_fails : t.user_fails;
  if (fails >= SVCMOD_MAX_FAILED_LOGINS) return CKR_PIN_LOCKED;
  int ok = who == CKU_SO ? pin_unwrap(pin, len, t.so_salt, t.so_wrap, PIN_AAD_SO, master)
                         : pin_unwrap(pin, len, t.user_salt, t.user_wrap, PIN_AAD_USER, master);
  OPENSSL_cleanse(&t, sizeof t);
  int after = record_attempt(who, ok, fresh);
  if (after < 0) return CKR_DEVICE_ERROR;
  return ok ? CKR_OK : CKR_PIN_INCORRECT;
}

/* Writes a new PIN of `who` (its salt and the master key sealed under it) into token.db; C_InitPIN
 * (`init_user`) also marks the user PIN set and clears its failure count. */
static CK_RV save_pin(CK_USER_TYPE who, int init_user, const uint8_t salt[SVCMOD_SALT_BYTES],
                      const uint8_t wrap[SVCMOD_WRAP_BYTES]) {
  pthread_mutex_lock(&g.lock);
  int fd = store_lock();
  token_state t;
  CK_RV rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
  if (rv == CKR_OK) {
    if (init_user) {
      t.user_set = 1;
      t.user_fails = 0;
    }
    memcpy(who == CKU_SO ? t.so_salt : t.user_salt, salt, SVCMOD_SALT_BYTES);
    memcpy(who == CKU_SO ? t.so_wrap : t.user_wrap, wrap, SVCMOD_WRAP_BYTES);
    rv = store_write_token(&t);
    if (rv == CKR_OK) g.tok = t;
    OPENSSL_cleanse(&t, sizeof t);
  }
  store_unlock(fd);
  pthread_mutex_unlock(&g.lock);
  return rv;
}

CK_RV C_InitToken(CK_SLOT_ID slotID, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen,
                  CK_UTF8CHAR *pLabel) {
  if (!g.initialized) return CKR_CRYPTOKI_NOT_INITIALIZED;
  if (slotID != 0) return CKR_SLOT_ID_INVALID;
  if (pPin == NULL || pLabel == NULL) return CKR_ARGUMENTS_BAD;
  if (!pin_len_ok(ulPinLen)) return CKR_PIN_LEN_RANGE;
  pthread_mutex_lock(&g.lock);
  CK_RV rv = g.nsessions > 0 ? CKR_SESSION_EXISTS : token_reload_locked();
  token_state t = g.tok;
  pthread_mutex_unlock(&g.lock);
  if (rv != CKR_OK) return rv;

  uint8_t master[32];
  if (t.initialized) {
    token_state fresh;
    rv = check_pin(CKU_SO, pPin, ulPinLen, master, &fresh);
    OPENSSL_cleanse(&fresh, sizeof fresh);
    if (rv != CKR_OK) return rv;
  }
  /* A fresh master key: whatever was sealed under the old one is gone with the objects. */
  token_state nt;
  memset(&nt, 0, sizeof nt);
  if (random_bytes(master, 32) != 0) return CKR_FUNCTION_FAILED;
  rv = pin_wrap(pPin, ulPinLen, master, PIN_AAD_SO, nt.so_salt, nt.so_wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv != CKR_OK) return rv;
  nt.initialized = 1;
  memcpy(nt.label, pLabel, 32);
  if (t.initialized) {
    memcpy(nt.serial, t.serial, 16);
  } else {
    uint8_t r[8];
    random_bytes(r, sizeof r);
    char hex[17];
    hex_encode(hex, r, 8);
    memcpy(nt.serial, hex, 16);
  }
  nt.next_id = t.next_id ? t.next_id : 1;

  pthread_mutex_lock(&g.lock);
  int fd = store_lock();
  if (fd < 0) rv = CKR_DEVICE_ERROR;
  if (rv == CKR_OK) {
    token_state cur;
    if (store_read_token(&cur) == CKR_OK && cur.next_id > nt.next_id) nt.next_id = cur.next_id;
    rv = store_wipe_objects();
    if (rv == CKR_OK) rv = store_write_token(&nt);
  }
  store_unlock(fd);
  if (rv == CKR_OK) {
    for (object_t *o = g.objects, *next; o; o = next) {
      next = o->next;
      if (o->on_token) object_unlink_free(o);
    }
    g.tok = nt;
  }
  pthread_mutex_unlock(&g.lock);
  OPENSSL_cleanse(&nt, sizeof nt);
  return rv;
}

CK_RV C_InitPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pPin, CK_ULONG ulPinLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  uint8_t master[32];
  pthread_mutex_lock(&g.lock);
  if (g.role != (long)CKU_SO || !(s->flags & CKF_RW_SESSION))
    rv = CKR_USER_NOT_LOGGED_IN;
  else if (pPin == NULL)
    rv = CKR_ARGUMENTS_BAD;
  else if (!pin_len_ok(ulPinLen))
    rv = CKR_PIN_LEN_RANGE;
  memcpy(master, g.master, 32);
  pthread_mutex_unlock(&g.lock);
  uint8_t salt[16], wrap[SVCMOD_WRAP_BYTES];
  if (rv == CKR_OK) rv = pin_wrap(pPin, ulPinLen, master, PIN_AAD_USER, salt, wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv == CKR_OK) rv = save_pin(CKU_USER, 1, salt, wrap);
  session_leave(s);
  return rv;
}

CK_RV C_SetPIN(CK_SESSION_HANDLE hSession, CK_UTF8CHAR *pOldPin, CK_ULONG ulOldLen,
               CK_UTF8CHAR *pNewPin, CK_ULONG ulNewLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  CK_USER_TYPE who = g.role == (long)CKU_SO ? CKU_SO : CKU_USER;
  if (!(s->flags & CKF_RW_SESSION))
    rv = CKR_SESSION_READ_ONLY;
  else if (pOldPin == NULL || pNewPin == NULL)
    rv = CKR_ARGUMENTS_BAD;
  else if (!pin_len_ok(ulNewLen))
    rv = CKR_PIN_LEN_RANGE;
  pthread_mutex_unlock(&g.lock);
  uint8_t master[32], salt[16], wrap[SVCMOD_WRAP_BYTES];
  token_state fresh;
  if (rv == CKR_OK) rv = check_pin(who, pOldPin, ulOldLen, master, &fresh);
  if (rv == CKR_OK)
    rv = pin_wrap(pNewPin, ulNewLen, master, who == CKU_SO ? PIN_AAD_SO : PIN_AAD_USER, salt, wrap);
  OPENSSL_cleanse(master, sizeof master);
  if (rv == CKR_OK) rv = save_pin(who, 0, salt, wrap);
  OPENSSL_cleanse(&fresh, sizeof fresh);
  session_leave(s);
  return rv;
}

/* ---- login ---------------------------------------------------------------------------------- */

static CK_RV login(session_t *s, CK_USER_TYPE who, const CK_UTF8CHAR *pin, CK_ULONG len) {
  (void)s;
  if (who == CKU_CONTEXT_SPECIFIC) return CKR_OPERATION_NOT_INITIALIZED; /* no such keys here */
  if (who != CKU_USER && who != CKU_SO) return CKR_USER_TYPE_INVALID;
  if (pin == NULL) return CKR_ARGUMENTS_BAD; /* no protected authentication path */
  pthread_mutex_lock(&g.lock);
  CK_RV rv = CKR_OK;
  if (g.role == (long)who)
    rv = CKR_USER_ALREADY_LOGGED_IN;
  else if (g.role != -1)
    rv = CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
  else if (who == CKU_SO)
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
      if (g.sessions[i].used && !(g.sessions[i].flags & CKF_RW_SESSION))
        rv = CKR_SESSION_READ_ONLY_EXISTS;
  pthread_mutex_unlock(&g.lock);
  if (rv != CKR_OK) return rv;

  uint8_t master[32];
  token_state fresh;
  rv = check_pin(who, pin, len, master, &fresh);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    if (g.role != -1) {
      /* another thread of this process won the race while the PIN was being derived */
      rv = g.role == (long)who ? CKR_USER_ALREADY_LOGGED_IN : CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
    } else {
      g.role = (long)who;
      g.tok = fresh;
      memcpy(g.master, master, 32);
      if (who == CKU_USER) {
        store_refresh(1);
        for (object_t *o = g.objects; o; o = o->next) object_unlock(o);
      }
    }
    pthread_mutex_unlock(&g.lock);
  }
  OPENSSL_cleanse(master, sizeof master);
  OPENSSL_cleanse(&fresh, sizeof fresh);
  return rv;
}

CK_RV C_Login(CK_SESSION_HANDLE hSession, CK_USER_TYPE userType, CK_UTF8CHAR *pPin,
              CK_ULONG ulPinLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = login(s, userType, pPin, ulPinLen);
  session_leave(s);
  return rv;
}

CK_RV C_Logout(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  if (g.role == -1)
    rv = CKR_USER_NOT_LOGGED_IN;
  else
    logout_locked();
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}
