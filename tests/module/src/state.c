/* The module's process-wide state (svcmod.h, module_state): one lock, the token, the objects, the
 * sessions and the secure heap. */
#include "svcmod.h"

module_state g = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER, .role = -1};

CK_RV module_ready(void) { return g.initialized ? CKR_OK : CKR_CRYPTOKI_NOT_INITIALIZED; }
