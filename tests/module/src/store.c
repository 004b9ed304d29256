/* Token persistence under tokendir: token.db (label, serial, PIN salts and sealed master keys,
 * failed-login counters) and one obj-<id>.db per token object. Files are small text files written
 * to a temporary name, synced and renamed; a flock on tokendir/.lock orders processes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "svcmod.h"

/* tokendir is checked to leave room for file names (config.c), so this never truncates. */
static void path_of(char *out, const char *name) {
  int n = snprintf(out, PATH_MAX, "%s/%s", g.cfg.tokendir, name);
  if (n < 0 || n >= PATH_MAX) out[0] = 0;
}

int store_lock(void) {
  char p[PATH_MAX];
  path_of(p, ".lock");
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

void store_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing drops the flock */
}

/* A growable text buffer for serialising. */
typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->oom) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = (t->cap ? t->cap * 2 : 1024);
    while (cap < t->len + n + 1) cap *= 2;
    char *ns = realloc(t->s, cap);
    if (ns == NULL) {
      t->oom = 1;
      return;
    }
    t->s = ns;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = 0;
}

static void put_str(text *t, const char *s) { put(t, s, strlen(s)); }

static void put_hex(text *t, const uint8_t *b, size_t n) {
  if (n == 0) {
    put_str(t, "-");
    return;
  }
  char chunk[129];
  for (size_t i = 0; i < n; i += 64) {
    size_t m = n - i < 64 ? n - i : 64;
    hex_encode(chunk, b + i, m);
    put(t, chunk, 2 * m);
  }
}

static void put_line_hex(text *t, const char *key, const uint8_t *b, size_t n) {
  put_str(t, key);
  put_str(t, " ");
  put_hex(t, b, n);
  put_str(t, "\n");
}

static void put_line_num(text *t, const char *key, unsigned long v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s %lu\n", key, v);
  put_str(t, buf);
}

static void text_free(text *t) {
  if (t->s) {
    OPENSSL_cleanse(t->s, t->cap);
    free(t->s);
  }
}

static CK_RV write_atomic(const char *name, const text *t) {
  if (t->oom) return CKR_HOST_MEMORY;
  char final[PATH_MAX], tmp[PATH_MAX + 64];
  path_of(final, name);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return CKR_DEVICE_ERROR;
  size_t off = 0;
  while (off < t->len) {
    ssize_t w = write(fd, t->s + off, t->len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  int ok = off == t->len && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, final) != 0) {
    unlink(tmp);
    return CKR_DEVICE_ERROR;
  }
  return CKR_OK;
}

/* Reads a whole file into a NUL-terminated buffer; NULL when absent. */
static char *read_all(const char *name, int *absent) {
  char p[PATH_MAX];
  path_of(p, name);
  *absent = 0;
  FILE *f = fopen(p, "re");
  if (f == NULL) {
    *absent = errno == ENOENT;
    return NULL;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    size_t r = fread(buf + len, 1, cap - len - 1, f);
    len += r;
    if (len < cap - 1) break;
    cap *= 2;
    char *nb = realloc(buf, cap);
    if (nb == NULL) {
      free(buf);
      buf = NULL;
    } else {
      buf = nb;
    }
  }
  fclose(f);
  if (buf) buf[len] = 0;
  return buf;
}

static void free_text_buf(char *buf) {
  if (buf) {
    OPENSSL_cleanse(buf, strlen(buf));
    free(buf);
  }
}

/* Decodes "KEY HEX" values of a fixed length. */
static int hex_field(const char *val, uint8_t *out, size_t n) {
  size_t len = strlen(val);
  if (len != 2 * n) return -1;
  return hex_decode_into(val, len, out);
}

CK_RV store_read_token(token_state *t) {
  int absent;
  char *buf = read_all("token.db", &absent);
  memset(t, 0, sizeof *t);
  t->next_id = 1;
  if (buf == NULL) return absent ? CKR_OK : CKR_DEVICE_ERROR;
  int bad = strncmp(buf, "svcmod-token 1\n", 15) != 0;
  for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line && !bad;
       line = strtok_r(NULL, "\n", &save)) {
    char *sp = strchr(line, ' ');
    if (sp == NULL) continue;
    *sp = 0;
    const char *k = line, *v = sp + 1;
    if (strcmp(k, "label") == 0)
      bad = hex_field(v, t->label, sizeof t->label);
    else if (strcmp(k, "serial") == 0) {
      bad = strlen(v) != 16;
      if (!bad) memcpy(t->serial, v, 16);
    }    else if (strcmp(k, "so_salt") == 0)
      bad = hex_field(v, t->so_salt, sizeof t->so_salt);
    else if (strcmp(k, "so_wrap") == 0)
      bad = hex_field(v, t->so_wrap, sizeof t->so_wrap);
    else if (strcmp(k, "so_fails") == 0)
      t->so_fails = (unsigned)strtoul(v, NULL, 10);
    else if (strcmp(k, "user_set") == 0)
      t->user_set = strcmp(v, "1") == 0;
    else if (strcmp(k, "user_salt") == 0)
      bad = hex_field(v, t->user_salt, sizeof t->user_salt);
    else if (strcmp(k, "user_wrap") == 0)
      bad = hex_field(v, t->user_wrap, sizeof t->user_wrap);
    else if (strcmp(k, "user_fails") == 0)
      t->user_fails = (unsigned)strtoul(v, NULL, 10);
    else if (strcmp(k, "next_id") == 0)
      t->next_id = strtoul(v, NULL, 10);
  }
  free_text_buf(buf);
  if (bad) {
    fprintf(stderr, "svcmod: %s/token.db is damaged; re-initialise the token\n", g.cfg.tokendir);
    memset(t, 0, sizeof *t);
    return CKR_DEVICE_ERROR;
  }
  t->initialized = 1;
  if (t->next_id == 0) t->next_id = 1;
  return CKR_OK;
}

CK_RV store_write_token(const token_state *t) {
  text x = {0};
  put_str(&x, "svcmod-token 1\n");
  put_line_hex(&x, "label", t->label, sizeof t->label);
  put_str(&x, "serial ");
  put(&x, t->serial, 16);
  put_str(&x, "\n");
  put_line_hex(&x, "so_salt", t->so_salt, sizeof t->so_salt);
  put_line_hex(&x, "so_wrap", t->so_wrap, sizeof t->so_wrap);
  put_line_num(&x, "so_fails", t->so_fails);
  put_line_num(&x, "user_set", (unsigned long)t->user_set);
  if (t->user_set) {
    put_line_hex(&x, "user_salt", t->user_salt, sizeof t->user_salt);
    put_line_hex(&x, "user_wrap", t->user_wrap, sizeof t->user_wrap);
  }
  put_line_num(&x, "user_fails", t->user_fails);
  put_line_num(&x, "next_id", t->next_id);
  CK_RV rv = write_atomic("token.db", &x);
  text_free(&x);
  return rv;
}

CK_RV store_write_object(const object_t *o) {
  text x = {0};
  put_str(&x, "svcmod-object 1\n");
  put_line_num(&x, "class", o->cls);
  put_line_num(&x, "keytype", o->ktype);
  put_line_num(&x, "private", (unsigned long)o->is_private);
  for (size_t i = 0; i < o->nattrs; i++) {
    char head[64];
    snprintf(head, sizeof head, "attr %lx", o->attrs[i].type);
    put_line_hex(&x, head, o->attrs[i].val, o->attrs[i].len);
  }
  if (o->sealed) put_line_hex(&x, "sealed", o->sealed, o->sealed_len);
  char name[64];
  snprintf(name, sizeof name, "obj-%lu.db", o->file_id);
  CK_RV rv = write_atomic(name, &x);
  text_free(&x);
  return rv;
}

CK_RV store_delete_object(unsigned long id) {
  char name[64], p[PATH_MAX];
  snprintf(name, sizeof name, "obj-%lu.db", id);
  path_of(p, name);
  return unlink(p) == 0 || errno == ENOENT ? CKR_OK : CKR_DEVICE_ERROR;
}

static int object_file_id(const char *name, unsigned long *id) {
  char tail[8];
  return sscanf(name, "obj-%lu%7s", id, tail) == 2 && strcmp(tail, ".db") == 0;
}

CK_RV store_wipe_objects(void) {
  DIR *d = opendir(g.cfg.tokendir);
  if (d == NULL) return CKR_DEVICE_ERROR;
  CK_RV rv = CKR_OK;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    unsigned long id;
    if (object_file_id(e->d_name, &id) && store_delete_object(id) != CKR_OK) rv = CKR_DEVICE_ERROR;
  }
  closedir(d);
  return rv;
}

/* Parses one object file into a new object (token object, handle = file id). */
static object_t *load_object(unsigned long id) {
  char name[64];
  int absent;
  snprintf(name, sizeof name, "obj-%lu.db", id);
  char *buf = read_all(name, &absent);
  if (buf == NULL) return NULL;
  object_t *o = calloc(1, sizeof *o);
  int bad = o == NULL || strncmp(buf, "svcmod-object 1\n", 16) != 0;
  for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line && !bad;
       line = strtok_r(NULL, "\n", &save)) {
    char *sp = strchr(line, ' ');
    if (sp == NULL) continue;
    *sp = 0;
    char *v = sp + 1;
    if (strcmp(line, "class") == 0) {
      o->cls = strtoul(v, NULL, 10);
    } else if (strcmp(line, "keytype") == 0) {
      o->ktype = strtoul(v, NULL, 10);
    } else if (strcmp(line, "private") == 0) {
      o->is_private = strcmp(v, "1") == 0;
    } else if (strcmp(line, "attr") == 0) {
      char *sp2 = strchr(v, ' ');
      if (sp2 == NULL) {
        bad = 1;
        break;
      }
      *sp2 = 0;
      CK_ATTRIBUTE_TYPE type = strtoul(v, NULL, 16);
      const char *hex = sp2 + 1;
      size_t hl = strcmp(hex, "-") == 0 ? 0 : strlen(hex);
      uint8_t *val = malloc(hl / 2 + 1);
      bad = val == NULL || hl % 2 || hex_decode_into(hex, hl, val) != 0 ||
            object_set_attr(o, type, val, (CK_ULONG)(hl / 2)) != CKR_OK;
      free(val);
    } else if (strcmp(line, "sealed") == 0) {
      size_t hl = strlen(v);
      o->sealed = malloc(hl / 2 + 1);
      o->sealed_len = hl / 2;
      bad = o->sealed == NULL || hl % 2 || hex_decode_into(v, hl, o->sealed) != 0;
    }
  }
  free_text_buf(buf);
  if (bad) {
    if (o) object_free(o);
    fprintf(stderr, "svcmod: %s/%s is damaged; ignoring it\n", g.cfg.tokendir, name);
    return NULL;
  }
  o->on_token = 1;
  o->file_id = id;
  o->handle = id;
  return o;
}

void store_refresh(int force) {
  struct stat st;
  if (stat(g.cfg.tokendir, &st) != 0) return;
  /* A directory's mtime has coarse granularity: trust "unchanged" only for an old mtime. */
  int recent = time(NULL) - st.st_mtim.tv_sec < 3;
  if (!force && !recent && st.st_mtim.tv_sec == g.dir_mtime.tv_sec &&
      st.st_mtim.tv_nsec == g.dir_mtime.tv_nsec)
    return;
  DIR *d = opendir(g.cfg.tokendir);
  if (d == NULL) return;
  g.dir_mtime = st.st_mtim;
  for (object_t *o = g.objects; o; o = o->next) o->seen = !o->on_token;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    unsigned long id;
    if (!object_file_id(e->d_name, &id)) continue;
    object_t *have = object_find(id);
    if (have != NULL && have->on_token) {
      have->seen = 1;
      continue;
    }
    object_t *o = load_object(id);
    if (o == NULL) continue;
    o->seen = 1;
    if (g.role == (long)CKU_USER) object_unlock(o);
    object_link(o);
  }
  closedir(d);
  for (object_t *o = g.objects, *next; o; o = next) {
    next = o->next;
    if (!o->seen) object_unlink_free(o);
  }
}

/* Reads token.db again: counters and initialisation may have been changed by another process. */
CK_RV token_reload_locked(void) {
  int fd = store_lock();
  if (fd < 0) return CKR_DEVICE_ERROR;
  token_state t;
  CK_RV rv = store_read_token(&t);
  store_unlock(fd);
  if (rv == CKR_OK) g.tok = t;
  OPENSSL_cleanse(&t, sizeof t);
  return rv;
}
