/* Sessions: the secure heap with its 24 KiB reservation per session, entering and leaving a call
 * on a session (a second concurrent call on one handle answers CKR_OPERATION_ACTIVE), closing,
 * and the logout that closing the last session brings. */
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "svcmod.h"

/* ---- secure heap: one 24 KiB reservation per session ------------------------------------------- */

CK_RV heap_map(void) {
  g.heap_bytes = (size_t)g.cfg.secure_heap_kb * 1024;
  void *p = mmap(NULL, g.heap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CKR_HOST_MEMORY;
  /* Locked and kept out of core dumps where the system allows it; RLIMIT_MEMLOCK may refuse the
   * lock for large heaps, which changes nothing about the accounting. */
  (void)mlock(p, g.heap_bytes);
  (void)madvise(p, g.heap_bytes, MADV_DONTDUMP);
  g.heap = p;
  g.heap_chunks = (unsigned)(g.heap_bytes / SVCMOD_SESSION_RESERVE);
  if (g.heap_chunks > sizeof g.chunk_used) g.heap_chunks = sizeof g.chunk_used;
  memset(g.chunk_used, 0, sizeof g.chunk_used);
  return CKR_OK;
}

void heap_unmap(void) {
  if (g.heap == NULL) return;
  OPENSSL_cleanse(g.heap, g.heap_bytes);
  munlock(g.heap, g.heap_bytes);
  munmap(g.heap, g.heap_bytes);
  g.heap = NULL;
}

int chunk_alloc(void) {
  for (unsigned i = 0; i < g.heap_chunks; i++) {
    if (!g.chunk_used[i]) {
      g.chunk_used[i] = 1;
      memset(g.heap + (size_t)i * SVCMOD_SESSION_RESERVE, 0, SVCMOD_SESSION_RESERVE);
      return (int)i;
    }
  }
  return -1;
}

static void chunk_release(unsigned i) {
  OPENSSL_cleanse(g.heap + (size_t)i * SVCMOD_SESSION_RESERVE, SVCMOD_SESSION_RESERVE);
  g.chunk_used[i] = 0;
}

/* ---- sessions -------------------------------------------------------------------------------- */

static session_t *session_find(CK_SESSION_HANDLE h) {
  if (h == CK_INVALID_HANDLE) return NULL;
  for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
    if (g.sessions[i].used && g.sessions[i].handle == h) return &g.sessions[i];
  return NULL;
}

/* Test hook: a file named `removed` in the token directory pulls the token out, so the daemon's
 * handling of a dead token (CKR_DEVICE_REMOVED on a pooled session) can be tested. */
static int token_removed(void) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/removed", g.cfg.tokendir);
  return access(path, F_OK) == 0;
}

CK_RV session_enter(CK_SESSION_HANDLE h, session_t **out) {
  pthread_mutex_lock(&g.lock);
  CK_RV rv = CKR_OK;
  session_t *s = NULL;
  if (!g.initialized)
    rv = CKR_CRYPTOKI_NOT_INITIALIZED;
  else if (token_removed())
    rv = CKR_DEVICE_REMOVED;
  else if ((s = session_find(h)) == NULL)
    rv = CKR_SESSION_HANDLE_INVALID;
  else if (s->busy)
    rv = CKR_OPERATION_ACTIVE; /* another thread is inside a call on this handle */
  else
    s->busy = 1;
  pthread_mutex_unlock(&g.lock);
  *out = rv == CKR_OK ? s : NULL;
  return rv;
}

void session_leave(session_t *s) {
  pthread_mutex_lock(&g.lock);
  s->busy = 0;
  pthread_cond_broadcast(&g.idle);
  pthread_mutex_unlock(&g.lock);
}

void op_end(op_t *op) {
  pkcs11_buffer_free(&op->parts);
  OPENSSL_cleanse(op, sizeof *op);
}

/* Logs the process out: key material of token objects is dropped, private session objects go. */
void logout_locked(void) {
  for (object_t *o = g.objects, *next; o; o = next) {
    next = o->next;
    if (!o->on_token && o->is_private)
      object_unlink_free(o);
    else
      object_lock(o);
  }
  OPENSSL_cleanse(g.master, sizeof g.master);
  g.role = -1;
}

void session_close_locked(session_t *s) {
  for (object_t *o = g.objects, *next; o; o = next) {
    next = o->next;
    if (!o->on_token && o->owner == s->handle) object_unlink_free(o);
  }
  pkcs11_search_end(&s->search);
  if (s->digest) EVP_MD_CTX_free(s->digest);
  s->digest = NULL;
  if (s->ops) {
    pkcs11_buffer_free(&s->ops->sign.parts);
    pkcs11_buffer_free(&s->ops->verify.parts);
  }
  chunk_release(s->chunk);
  s->ops = NULL;
  s->used = 0;
  s->handle = CK_INVALID_HANDLE;
  g.nsessions--;
  if (g.nsessions == 0 && g.role != -1) logout_locked();
}

static void wait_idle_locked(void) {
  for (;;) {
    int busy = 0;
    for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++) busy |= g.sessions[i].used && g.sessions[i].busy;
    if (!busy) return;
    pthread_cond_wait(&g.idle, &g.lock);
  }
}

void close_all_locked(void) {
  wait_idle_locked();
  for (unsigned i = 0; i < SVCMOD_MAX_SESSIONS; i++)
    if (g.sessions[i].used) session_close_locked(&g.sessions[i]);
}
