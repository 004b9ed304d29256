/* The module's life between C_Initialize and C_Finalize. Every call holds it for reading while it
 * runs (life_enter / life_leave); C_Initialize and C_Finalize hold it for writing. */
#ifndef SVCP11_LIFE_H
#define SVCP11_LIFE_H

#include "pkcs11.h"

/* CKR_CRYPTOKI_NOT_INITIALIZED, also in a child forked from an initialised parent (until it
 * finalises and initialises again); else CKR_OK with the read hold taken. */
CK_RV life_enter(void);
void life_leave(void);
/* The write hold of C_Initialize and C_Finalize. */
void life_change_begin(void);
void life_change_end(void);
/* Under the write hold: whether the module is initialised, and whether by another process (the
 * parent this one was forked from). */
int life_initialized(void);
int life_inherited(void);
/* Under the write hold: initialised now, by this process; or finalised. */
void life_set_initialized(int initialized);
/* In a forked child: the inherited lock may be held by a thread that does not exist there. */
void life_reset_lock(void);

#endif
