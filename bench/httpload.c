/*
 * A closed-loop HTTP/1.1 load generator in C, for benches where the client's own cost would
 * otherwise decide the figure: one thread, one epoll loop, `concurrency` connections at a time,
 * one request per connection (the server closes it), for `seconds`. Prints one JSON line in the
 * shape of bench/load.ts's LoadResult. Built and run by bench/ocsp.ts (gcc, no libraries).
 *
 *   httpload (--unix PATH | --tcp IP:PORT) --path /ocsp --body-file req.der
 *            [--header "X-SVC-Key: none"]... [--concurrency 16] [--seconds 3] [--warmup 0.5]
 *            [--identities N]
 *
 * With --identities N, connection slot i sends X-SVC-Client-Subject: CN=bench<i mod N>,O=Bench
 * (as bench/load.ts does, so the per-identity cap of /sign does not apply to a c=16 load).
 *
 * A request counts as ok when the answer starts with "HTTP/1.x 200"; anything else, a refused
 * connection or a reset is an error (counted, and the loop goes on). Requests started in the
 * first `warmup` seconds are not counted (the server's JIT and caches settle).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct conn {
  int fd;
  const char *request;
  size_t request_len;
  size_t sent;
  size_t got;
  char head[16];
  double start;
};

static struct sockaddr_storage target;
static socklen_t target_len;
static double *latencies;
static size_t latency_count, latency_cap;
static long errors;
static double counted_from;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "httpload: %s\n", what);
  exit(2);
}

static void parse_target(const char *unix_path, const char *tcp) {
  memset(&target, 0, sizeof target);
  if (unix_path) {
    struct sockaddr_un *un = (struct sockaddr_un *)&target;
    if (strlen(unix_path) >= sizeof un->sun_path) die("--unix path too long");
    un->sun_family = AF_UNIX;
    strcpy(un->sun_path, unix_path);
    target_len = sizeof *un;
    return;
  }
  struct sockaddr_in *in = (struct sockaddr_in *)&target;
  char host[64];
  const char *colon = strrchr(tcp, ':');
  if (!colon || (size_t)(colon - tcp) >= sizeof host) die("--tcp needs IP:PORT");
  memcpy(host, tcp, colon - tcp);
  host[colon - tcp] = 0;
  in->sin_family = AF_INET;
  in->sin_port = htons((unsigned short)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &in->sin_addr) != 1) die("--tcp needs an IPv4 address");
  target_len = sizeof *in;
}

/* The request of one connection slot; `identity` < 0: no subject header. */
static void build_request(struct conn *c, const char *path, const char *body, size_t body_len,
                          char **headers, int nheaders, int identity) {
  size_t cap = body_len + 4096;
  char *request = malloc(cap);
  int n = snprintf(request, cap, "POST %s HTTP/1.1\r\nHost: svcd\r\n", path);
  for (int i = 0; i < nheaders; i++) n += snprintf(request + n, cap - n, "%s\r\n", headers[i]);
  if (identity >= 0) {
    n += snprintf(request + n, cap - n, "X-SVC-Client-Subject: CN=bench%d,O=Bench\r\n", identity);
  }
  n += snprintf(request + n, cap - n, "Content-Length: %zu\r\n\r\n", body_len);
  memcpy(request + n, body, body_len);
  c->request = request;
  c->request_len = n + body_len;
}

static void record(double started, int ok) {
  if (started < counted_from) return;
  double ms = now_ms() - started;
  if (latency_count == latency_cap) {
    latency_cap = latency_cap ? latency_cap * 2 : 65536;
    latencies = realloc(latencies, latency_cap * sizeof *latencies);
  }
  latencies[latency_count++] = ms;
  if (!ok) errors++;
}

/* Opens the next connection of slot `c`; its first event says it is writable. */
static void start(int ep, struct conn *c) {
  c->fd = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) die("socket() failed");
  c->sent = c->got = 0;
  c->start = now_ms();
  if (connect(c->fd, (struct sockaddr *)&target, target_len) != 0 && errno != EINPROGRESS) {
    close(c->fd);
    record(c->start, 0);
    c->fd = -1;
    return;
  }
  struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.ptr = c};
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void finish(struct conn *c, int ok) {
  close(c->fd);
  c->fd = -1;
  record(c->start, ok);
}

static int answered_200(const struct conn *c) {
  return c->got >= 12 && memcmp(c->head, "HTTP/1.", 7) == 0 && memcmp(c->head + 9, "200", 3) == 0;
}

/* Progress on a ready connection; returns 1 when it is finished (closed). */
static int step(int ep, struct conn *c, unsigned events) {
  if (c->sent < c->request_len && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    ssize_t w = send(c->fd, c->request + c->sent, c->request_len - c->sent, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN) return finish(c, 0), 1;
    if (w > 0) c->sent += w;
    if (c->sent == c->request_len) {
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
      epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    char buf[16384];
    for (;;) {
      ssize_t r = read(c->fd, buf, sizeof buf);
      if (r > 0) {
        size_t keep = c->got < sizeof c->head ? sizeof c->head - c->got : 0;
        memcpy(c->head + c->got, buf, (size_t)r < keep ? (size_t)r : keep);
        c->got += r;
        continue;
      }
      if (r == 0) return finish(c, c->sent == c->request_len && answered_200(c)), 1;
      if (errno == EAGAIN) return 0;
      return finish(c, 0), 1;
    }
  }
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *unix_path = NULL, *tcp = NULL, *path = "/", *body_file = NULL;
  char *headers[16];
  int nheaders = 0, concurrency = 16, identities = 0;
  double seconds = 3, warmup = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--unix")) unix_path = argv[i + 1];
    else if (!strcmp(argv[i], "--tcp")) tcp = argv[i + 1];
    else if (!strcmp(argv[i], "--path")) path = argv[i + 1];
    else if (!strcmp(argv[i], "--body-file")) body_file = argv[i + 1];
    else if (!strcmp(argv[i], "--concurrency")) concurrency = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--header") && nheaders < 16) headers[nheaders++] = argv[i + 1];
    else if (!strcmp(argv[i], "--identities")) identities = atoi(argv[i + 1]);
    else die("unknown option; see the comment at the top of bench/httpload.c");
  }
  if ((!unix_path == !tcp) || !body_file || concurrency < 1 || seconds <= 0 || warmup < 0) {
    die("usage: httpload (--unix PATH | --tcp IP:PORT) --body-file F [--path P] "
        "[--header H]... [--concurrency N] [--seconds S] [--warmup S]");
  }
  parse_target(unix_path, tcp);
  FILE *f = fopen(body_file, "rb");
  if (!f) die("cannot open --body-file");
  static char body[65536];
  size_t body_len = fread(body, 1, sizeof body, f);
  fclose(f);
  struct conn *conns = calloc(concurrency, sizeof *conns);
  for (int i = 0; i < concurrency; i++) {
    build_request(&conns[i], path, body, body_len, headers, nheaders,
                  identities > 0 ? i % identities : -1);
  }

  int ep = epoll_create1(EPOLL_CLOEXEC);
  double begin = now_ms(), end = begin + (warmup + seconds) * 1e3;
  counted_from = begin + warmup * 1e3;
  int open = 0;
  for (int i = 0; i < concurrency; i++) {
    start(ep, &conns[i]);
    if (conns[i].fd >= 0) open++;
  }
  struct epoll_event events[256];
  while (open > 0) {
    int n = epoll_wait(ep, events, 256, 1000);
    for (int i = 0; i < n; i++) {
      struct conn *c = events[i].data.ptr;
      if (!step(ep, c, events[i].events)) continue;
      open--;
      if (now_ms() < end) {
        start(ep, c);
        if (c->fd >= 0) open++;
      }
    }
    // A slot whose connect failed at once is restarted here, so the concurrency holds.
    for (int i = 0; i < concurrency && now_ms() < end; i++) {
      if (conns[i].fd < 0) {
        start(ep, &conns[i]);
        if (conns[i].fd >= 0) open++;
      }
    }
  }
  double elapsed = (now_ms() - counted_from) / 1e3;
  qsort(latencies, latency_count, sizeof *latencies, by_value);
#define PCT(p) (latency_count ? latencies[(size_t)((latency_count - 1) * (p))] : 0)
  printf("{\"concurrency\":%d,\"requests\":%zu,\"errors\":%ld,\"seconds\":%.3f,"
         "\"perSecond\":%.1f,\"p50ms\":%.3f,\"p99ms\":%.3f}\n",
         concurrency, latency_count, errors, elapsed, (latency_count - errors) / elapsed,
         PCT(0.5), PCT(0.99));
  return 0;
}
