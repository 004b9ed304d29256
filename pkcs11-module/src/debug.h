/* What the module does, on stderr, only when SVCD_PKCS11_DEBUG is set (and not "0"). */
#ifndef SVCP11_DEBUG_H
#define SVCP11_DEBUG_H

/* Reads SVCD_PKCS11_DEBUG (at C_Initialize). */
void debug_init(void);
void debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
