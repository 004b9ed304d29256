/*
 * svcd-limit: the limit of svcd's POST /sign on this machine, as a reference for bench/limit.ts. A
 * server in C that does per request what `svcd serve` does for POST /sign and nothing more:
 *
 * - accept on a UNIX socket and check the peer's uid (SO_PEERCRED) against --proxy-uid;
 * - parse POST /sign and its headers (X-SVC-Client-Subject once, X-SVC-Key once, Content-Length);
 * - the per-identity cap (--workers minus one requests in flight per subject, then 429);
 * - the policy lookup (the policy file: `subject<TAB>label` per line, `#` comments), the daemon's
 *   own key labels refused whatever it says, one 403 for every refusal;
 * - SHA-256 of the body and C_Sign(CKM_ECDSA) over it with a session copy of the key (C_CopyObject,
 *   CKA_TOKEN false), one session per worker thread;
 * - the audit line of svcd (lib/audit/format.ts: the same members in the same order, the SHA-256
 *   chain, the token's HMAC seal on the last line of each group, a signed checkpoint every
 *   --checkpoint-every lines and at the end), so that `svcd audit verify` passes over its folder;
 * - one write and one fdatasync per group commit, on a thread of its own;
 * - the answer only once its line is durable, then Connection: close.
 *
 * Not here, since the bench sends none of it: the refusal budget, a policy reload, /verify and the
 * other routes (404), keys other than EC P-256, subjects that are not UTF-8 (400; svcd logs their
 * bytes), audit recovery after a failed write (the server then answers 503 until restarted),
 * continuing an earlier chain (--audit-dir must be empty), the acceptor that holds silent
 * connections (a worker waits up to 10 s per read instead).
 *
 * Threads: --threads workers (accept, parse, sign, hand the line over), one writer (chain, seal,
 * write, fdatasync), one that answers (the requests of durable groups). With --no-audit a worker
 * answers at once.
 *
 *   svcd-limit --socket PATH --proxy-uid UID --policy FILE --module LIB --token LABEL
 *              --pin-file FILE (--audit-dir DIR | --no-audit) [--threads 4] [--workers 16]
 *              [--checkpoint-every 1000] [--max-body 1048576]
 *
 * Prints "listening on PATH" to stderr when ready; SIGTERM or SIGINT: stops accepting, answers
 * what is in flight, writes the shutdown line and a final checkpoint, exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "audit.h"
#include "http.h"
#include "options.h"
#include "policy.h"
#include "sign.h"
#include "token.h"

static int listen_fd;
static atomic_int stopping;

static void *worker_main(void *arg) {
  struct worker *w = arg;
  pthread_setname_np(pthread_self(), "limit-worker");
  w->session = open_session();
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (atomic_load(&stopping)) break;
      continue;
    }
    serve(w, fd);
  }
  P11(C_CloseSession)(w->session);
  return NULL;
}

/* The answering thread: answers of durable groups (or 503 when their group failed), then close. */
static void *answering_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "limit-answer");
  for (struct job *group; (group = queue_take(&answers));) {
    while (group) {
      struct job *next = group->next;
      if (group->failed) {
        refuse(group->fd, 503, "Service Unavailable",
               "The audit log cannot be written; no signature was released.", "Retry-After: 5\r\n");
      } else {
        answer_now(group->fd, &group->answer);
      }
      identity_leave(group->who);
      free_job(group);
      group = next;
    }
  }
  return NULL;
}

static void listen_on_socket(void) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(opt.socket) >= sizeof a.sun_path) die("--socket path is too long");
  strcpy(a.sun_path, opt.socket);
  unlink(opt.socket);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0) {
    die("cannot bind %s: %s", opt.socket, strerror(errno));
  }
  chmod(opt.socket, 0660);
  if (listen(listen_fd, 256) != 0) die("cannot listen on %s", opt.socket);
}

int main(int argc, char **argv) {
  parse_options(argc, argv);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  fetch_sha256();
  load_module();
  find_slot();
  CK_SESSION_HANDLE first = open_session();
  login(first);
  load_policy();
  unsigned char random[4];
  if (P11(C_GenerateRandom)(first, random, 4) != CKR_OK) die("C_GenerateRandom failed");
  request_prefix = (uint32_t)random[0] << 24 | random[1] << 16 | random[2] << 8 | random[3];
  listen_on_socket();
  if (opt.audit) open_audit(first);
  pthread_t writer, answering, *workers = calloc((size_t)opt.threads, sizeof *workers);
  struct worker *state = calloc((size_t)opt.threads, sizeof *state);
  if (opt.audit) {
    pthread_create(&writer, NULL, writer_main, NULL);
    pthread_create(&answering, NULL, answering_main, NULL);
  }
  for (int i = 0; i < opt.threads; i++) pthread_create(&workers[i], NULL, worker_main, &state[i]);
  fprintf(stderr, "svcd-limit: listening on %s (%d threads, audit %s)\n", opt.socket,
          opt.threads, opt.audit ? "on" : "off");
  int sig;
  sigwait(&stop, &sig);
  atomic_store(&stopping, 1);
  shutdown(listen_fd, SHUT_RDWR);
  for (int i = 0; i < opt.threads; i++) pthread_join(workers[i], NULL);
  if (opt.audit) {
    audit_close();
    pthread_join(writer, NULL);
    queue_close(&answers);
    pthread_join(answering, NULL);
  }
  close(listen_fd);
  unlink(opt.socket);
  P11(C_Finalize)(NULL);
  fprintf(stderr, "svcd-limit: stopped\n");
  return 0;
}
