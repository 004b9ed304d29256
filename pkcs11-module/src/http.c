/* HTTP to the proxy through libcurl. Each endpoint has a pool of easy handles; a handle keeps its
 * TLS connection alive between calls, and the handles share one TLS session cache, so a call
 * reuses a connection (or at least a session) instead of a full handshake. Every call is bounded
 * by the endpoint's timeout, 429/503 retries included. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pkcs11_buffer.h"
#include "clock.h"
#include "debug.h"
#include "http.h"

struct http_pool {
  endpoint_config ep;
  pthread_mutex_t lock;
  CURL **idle;
  size_t nidle, cap;
  CURLSH *share;
  pthread_mutex_t share_lock;
};

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *user) {
  (void)h, (void)d, (void)a;
  pthread_mutex_lock(&((http_pool *)user)->share_lock);
}

static void share_unlock(CURL *h, curl_lock_data d, void *user) {
  (void)h, (void)d;
  pthread_mutex_unlock(&((http_pool *)user)->share_lock);
}

http_pool *http_pool_new(const endpoint_config *ep) {
  http_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->ep = *ep;
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->share_lock, NULL);
  p->share = curl_share_init();
  if (p->share != NULL) {
    curl_share_setopt(p->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(p->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(p->share, CURLSHOPT_USERDATA, p);
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  }
  return p;
}

void http_pool_free(http_pool *p, int abandon) {
  if (p == NULL) return;
  if (!abandon) {
    for (size_t i = 0; i < p->nidle; i++) curl_easy_cleanup(p->idle[i]);
    if (p->share != NULL) curl_share_cleanup(p->share);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->share_lock);
  }
  free(p->idle);
  free(p);
}

static CURL *handle_new(http_pool *p) {
  CURL *h = curl_easy_init();
  if (h == NULL) return NULL;
  /* Signals are the calling program's: libcurl must not install a SIGALRM handler for timeouts. */
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
  if (p->share != NULL) curl_easy_setopt(h, CURLOPT_SHARE, p->share);
  if (p->ep.cacert[0]) curl_easy_setopt(h, CURLOPT_CAINFO, p->ep.cacert);
  if (p->ep.cert[0]) curl_easy_setopt(h, CURLOPT_SSLCERT, p->ep.cert);
  if (p->ep.key[0]) curl_easy_setopt(h, CURLOPT_SSLKEY, p->ep.key);
  return h;
}

static CURL *handle_take(http_pool *p) {
  pthread_mutex_lock(&p->lock);
  CURL *h = p->nidle > 0 ? p->idle[--p->nidle] : NULL;
  pthread_mutex_unlock(&p->lock);
  return h != NULL ? h : handle_new(p);
}

static void handle_give_back(http_pool *p, CURL *h) {
  pthread_mutex_lock(&p->lock);
  if (p->nidle == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 8;
    CURL **idle = realloc(p->idle, cap * sizeof *idle);
    if (idle == NULL) {
      pthread_mutex_unlock(&p->lock);
      curl_easy_cleanup(h);
      return;
    }
    p->idle = idle;
    p->cap = cap;
  }
  p->idle[p->nidle++] = h;
  pthread_mutex_unlock(&p->lock);
}

/* The most an answer may carry: more is not svcd's, and the transfer is aborted. */
#define ANSWER_LIMIT (64UL * 1024 * 1024)

static size_t collect(char *ptr, size_t size, size_t nmemb, void *user) {
  size_t n = size * nmemb;
  return pkcs11_buffer_append(user, ptr, n, ANSWER_LIMIT) == CKR_OK ? n : 0;
}

/* The CKR_* of a transport failure. */
static CK_RV curl_to_rv(CURLcode c) {
  switch (c) {
    case CURLE_OPERATION_TIMEDOUT:
      return CKR_FUNCTION_CANCELED;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      return CKR_DEVICE_REMOVED;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
      return CKR_GENERAL_ERROR;
    case CURLE_OUT_OF_MEMORY:
      return CKR_HOST_MEMORY;
    default:
      return CKR_DEVICE_ERROR;
  }
}

CK_RV status_to_rv(long status, const char *route) {
  if (status >= 200 && status < 300) return CKR_OK;
  switch (status) {
    case 403:
      return strcmp(route, "token") == 0 ? CKR_TOKEN_NOT_RECOGNIZED : CKR_KEY_FUNCTION_NOT_PERMITTED;
    case 413:
      return CKR_DATA_LEN_RANGE;
    case 422:
      return CKR_SIGNATURE_INVALID;
    case 429:
    case 503:
      return CKR_FUNCTION_FAILED;
    case 400:
      return CKR_GENERAL_ERROR;
    default:
      return CKR_DEVICE_ERROR;
  }
}

/* One attempt. */
static CK_RV attempt(http_pool *p, CURL *h, const char *method, const char *url,
                     struct curl_slist *hdrs, const unsigned char *body, size_t len,
                     long budget_ms, http_answer *out) {
  pkcs11_buffer b = {0};
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, budget_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, budget_ms);
  if (strcmp(method, "POST") == 0) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body != NULL ? (const char *)body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  }
  CURLcode c = curl_easy_perform(h);
  if (c != CURLE_OK) {
    pkcs11_buffer_free(&b);
    debug_log("%s %s: %s", method, url, curl_easy_strerror(c));
    return curl_to_rv(c);
  }
  (void)p;
  curl_off_t retry = -1;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
  if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry) != CURLE_OK) retry = -1;
  out->retry_after = out->status == 429 || out->status == 503 ? (long)retry : -1;
  out->body = b.data;
  out->len = b.len;
  debug_log("%s %s: %ld (%zu bytes)", method, url, out->status, b.len);
  return CKR_OK;
}

CK_RV http_call(http_pool *p, const char *method, const char *path, const char *const *headers,
                const unsigned char *body, size_t len, http_answer *out) {
  memset(out, 0, sizeof *out);
  char url[sizeof p->ep.url + 64];
  snprintf(url, sizeof url, "%s%s", p->ep.url, path);
  struct curl_slist *hdrs = curl_slist_append(NULL, "Expect:");
  for (size_t i = 0; headers != NULL && headers[i] != NULL && hdrs != NULL; i++)
    hdrs = curl_slist_append(hdrs, headers[i]);
  if (hdrs == NULL) return CKR_HOST_MEMORY;
  CURL *h = handle_take(p);
  if (h == NULL) {
    curl_slist_free_all(hdrs);
    return CKR_HOST_MEMORY;
  }
  long deadline = now_ms() + p->ep.timeout_ms;
  CK_RV rv = CKR_OK;
  for (int tries = 0;; tries++) {
    long left = deadline - now_ms();
    if (left <= 0) {
      rv = CKR_FUNCTION_CANCELED;
      break;
    }
    rv = attempt(p, h, method, url, hdrs, body, len, left, out);
    if (rv != CKR_OK || out->retry_after < 0 || tries == SVCP11_MAX_RETRIES) break;
    /* Busy (429/503): wait as told, unless the wait would not end before the deadline. */
    long wait = out->retry_after * 1000L;
    if (now_ms() + wait >= deadline) break;
    debug_log("%ld: retrying after %ld s", out->status, out->retry_after);
    http_answer_free(out);
    sleep_ms(wait);
  }
  curl_slist_free_all(hdrs);
  if (rv == CKR_OK)
    handle_give_back(p, h);
  else
    curl_easy_cleanup(h); /* a failed transfer's connection is not worth keeping */
  return rv;
}

void http_answer_free(http_answer *a) {
  free(a->body);
  a->body = NULL;
  a->len = 0;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_result;
/* Never undone: curl_global_cleanup is not safe while the host program uses libcurl itself. */
static void global_init(void) { global_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

CK_RV http_global_init(void) {
  pthread_once(&global_once, global_init);
  return global_result == CURLE_OK ? CKR_OK : CKR_GENERAL_ERROR;
}
