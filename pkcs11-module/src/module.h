/* The module as a whole: C_Initialize reads the configuration and makes the slots, C_Finalize
 * drops them with every session, C_GetInfo describes the library. */
#ifndef SVCP11_MODULE_H
#define SVCP11_MODULE_H

#include "pkcs11.h"

/* C_Initialize once its arguments are checked. */
CK_RV module_initialize(void);
CK_RV module_finalize(void);
void module_info(CK_INFO *info);

#endif
