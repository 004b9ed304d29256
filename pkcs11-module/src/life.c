#include "life.h"

#include <pthread.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static pthread_rwlock_t life = PTHREAD_RWLOCK_INITIALIZER;
static int initialized;
static pid_t initialized_by;

CK_RV life_enter(void) {
  pthread_rwlock_rdlock(&life);
  if (!initialized || initialized_by != getpid()) {
    pthread_rwlock_unlock(&life);
    return CKR_CRYPTOKI_NOT_INITIALIZED;
  }
  return CKR_OK;
}

void life_leave(void) { pthread_rwlock_unlock(&life); }

void life_change_begin(void) { pthread_rwlock_wrlock(&life); }

void life_change_end(void) { pthread_rwlock_unlock(&life); }

int life_initialized(void) { return initialized; }

int life_inherited(void) { return initialized_by != getpid(); }

void life_set_initialized(int now) {
  initialized = now;
  if (now) initialized_by = getpid();
}

void life_reset_lock(void) {
  pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
  memcpy(&life, &fresh, sizeof fresh);
}
