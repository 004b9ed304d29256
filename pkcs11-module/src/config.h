/* Where the module signs: SVCD_PKCS11_CONF (one [endpoint] section per slot) or, without it, the
 * same variables as `svcd client` (SVCD_ADDR, SVCD_CACERT, SVCD_CLIENT_CERT, SVCD_CLIENT_KEY). */
#ifndef SVCP11_CONFIG_H
#define SVCP11_CONFIG_H

#include <stddef.h>

#include "key_type.h"
#include "pkcs11.h"

#define SVCP11_MAX_ENDPOINTS 16
#define SVCP11_DEFAULT_TIMEOUT_MS 30000L
#define SVCP11_DEFAULT_MAX_BODY (1024UL * 1024UL)

typedef struct {
  char url[512]; /* https://host:port, no trailing slash */
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

#endif
