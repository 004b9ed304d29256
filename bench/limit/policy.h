/* Who may sign with what: the policy file, the daemon's own labels, the per-identity cap. */
#ifndef SVCD_LIMIT_POLICY_H
#define SVCD_LIMIT_POLICY_H

#include <stddef.h>

/* Reads --policy (`subject<TAB>label` per line, `#` comments) once; dies on a malformed line. */
void load_policy(void);
/* Whether the policy grants `label` to `subject`. */
int policy_allows(const char *subject, size_t slen, const char *label, size_t llen);
/* Whether `label` is one svcd keeps for itself (lib/token: DAEMON_KEY_LABELS): never a client's. */
int is_daemon_label(const char *label, size_t len);

/* A subject with requests in flight. */
struct identity;
/* Counts one more request of `subject`; NULL when it already has --workers - 1 in flight. */
struct identity *identity_enter(const char *subject, size_t len);
/* One request of `e` is answered; the entry goes when none is left in flight. */
void identity_leave(struct identity *e);

#endif
