#include "module.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "debug.h"
#include "http.h"
#include "life.h"
#include "pkcs11_padded.h"
#include "session.h"
#include "slot.h"

_Static_assert(sizeof(CK_TOKEN_INFO) == 208, "CK_TOKEN_INFO layout");
_Static_assert(sizeof(CK_INFO) == 88, "CK_INFO layout");
_Static_assert(sizeof(CK_SLOT_INFO) == 112, "CK_SLOT_INFO layout");
_Static_assert(sizeof(CK_C_INITIALIZE_ARGS) == 48, "CK_C_INITIALIZE_ARGS layout");

/* A child forked from an initialised parent: its inherited locks may be held by threads that do
 * not exist in it. They are made fresh here; the state stays marked as the parent's. */
static void atfork_child(void) {
  life_reset_lock();
  sessions_reset_lock();
  slots_reset_locks();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

CK_RV module_initialize(void) {
  pthread_once(&atfork_once, install_atfork);
  life_change_begin();
  if (life_initialized()) {
    /* A child forked from an initialised parent inherits the state; initialising again there is
     * not a legal move (as on the test module): it must C_Finalize first. */
    CK_RV rv = life_inherited() ? CKR_FUNCTION_FAILED : CKR_CRYPTOKI_ALREADY_INITIALIZED;
    life_change_end();
    return rv;
  }
  debug_init();
  client_config cfg;
  char why[256] = "";
  CK_RV rv = http_global_init();
  if (rv != CKR_OK)
    snprintf(why, sizeof why, "libcurl did not initialise");
  else
    rv = config_load(&cfg, why, sizeof why);
  if (rv == CKR_OK) rv = slots_create(&cfg);
  if (rv == CKR_OK) {
    life_set_initialized(1);
    debug_log("initialised: %u endpoint(s), first %s", slot_count(), slot_by_id(0)->cfg.url);
  } else {
    debug_log("C_Initialize: %s", why);
    slots_free(0);
  }
  life_change_end();
  return rv;
}

CK_RV module_finalize(void) {
  life_change_begin();
  if (!life_initialized()) {
    life_change_end();
    return CKR_CRYPTOKI_NOT_INITIALIZED;
  }
  /* In a forked child the connections are the parent's: dropped here, never closed (a TLS close
   * would end the parent's session). */
  int child = life_inherited();
  sessions_free();
  slots_free(child);
  life_set_initialized(0);
  life_change_end();
  return CKR_OK;
}

void module_info(CK_INFO *info) {
  memset(info, 0, sizeof *info);
  info->cryptokiVersion = (CK_VERSION){3, 2};
  pkcs11_pad(info->manufacturerID, 32, SVCP11_MANUFACTURER);
  pkcs11_pad(info->libraryDescription, 32, "svcd remote signing client");
  info->libraryVersion = (CK_VERSION){1, 0};
}
