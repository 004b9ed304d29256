/* The POST /sign route: a connection's request checked, signed, its line and answer made. */
#ifndef SVCD_LIMIT_SIGN_H
#define SVCD_LIMIT_SIGN_H

#include <stdint.h>

#include "token.h"

/* The first half of every request_id, random per start (as svcd's). */
extern uint32_t request_prefix;

/* One connection: its request, its answer (now, or once its line is durable). */
void serve(struct worker *w, int fd);

#endif
