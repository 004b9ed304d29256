/* The audit log of svcd (lib/audit/format.ts): its lines, their SHA-256 chain, the token's seal on
 * the last line of each group, signed checkpoints, one write and one fdatasync per group. */
#ifndef SVCD_LIMIT_AUDIT_H
#define SVCD_LIMIT_AUDIT_H

#include "queue.h"
#include "token.h"

/* Fetches SHA-256 from OpenSSL once (an implicit fetch per digest costs a lookup each time); dies
 * without it. */
void fetch_sha256(void);
/* Creates audit.log.000001 in --audit-dir (which must hold none), syncs the folder, and writes the
 * login_ok and listener_start lines with the keys of session `s`; dies when it cannot. */
void open_audit(CK_SESSION_HANDLE s);
/* Whether lines are still written: after a failed group, signing stops. */
int audit_healthy(void);
/* Hands a signed request (its line in head and tail) to the writer. */
void audit_submit(struct job *j);
/* No more requests come: the writer writes what it has, the shutdown line and a checkpoint. */
void audit_close(void);
/* The writer thread: every line queued since the last group is the next group. */
void *writer_main(void *arg);

/* Requests whose line is durable (or whose group failed), for the thread that answers them. */
extern struct queue answers;

#endif
