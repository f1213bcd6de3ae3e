/* Small utilities: file reading and atomic writing, name suggestions, number parsing (core layer).
 *
 * Files are read only when they are regular files (opened non-blocking, so a FIFO cannot hang a read), and
 * written through an exclusively created temporary beside the target (see write_target below); the
 * allocations go through the context's allocator (core/alloc.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

size_t util_edit_distance(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  if (na > 128 || nb > 128) return (size_t)-1;
  size_t row[129];
  for (size_t j = 0; j <= nb; j++) row[j] = j;
  for (size_t i = 1; i <= na; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t up = row[j];
      size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
      size_t best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}

void util_suggest(const char *name, const char *const *candidates, size_t n, char *out, size_t out_n) {
  size_t best[3] = {(size_t)-1, (size_t)-1, (size_t)-1};
  size_t idx[3] = {0, 0, 0};
  size_t n_name = strlen(name), limit = n_name / 2 + 2;
  for (size_t i = 0; i < n; i++) {
    /* A candidate that contains the name (or the reverse) is close whatever the edit distance. */
    bool contains = strstr(candidates[i], name) || strstr(name, candidates[i]);
    /* The distance is at least the difference in length: past the limit, the candidate is never shown, so
     * the quadratic distance is not computed (a long unknown key against every name made bad input slow). */
    size_t n_cand = strlen(candidates[i]), gap = n_cand > n_name ? n_cand - n_name : n_name - n_cand;
    if (!contains && gap > limit) continue;
    size_t d = util_edit_distance(name, candidates[i]);
    if (contains) d = d < 2 ? d : 2;
    for (size_t k = 0; k < 3; k++) {
      if (d < best[k]) {
        for (size_t m = 2; m > k; m--) {
          best[m] = best[m - 1];
          idx[m] = idx[m - 1];
        }
        best[k] = d;
        idx[k] = i;
        break;
      }
    }
  }
  out[0] = '\0';
  for (size_t k = 0; k < 3; k++) {
    if (best[k] == (size_t)-1 || best[k] > limit) break;
    size_t len = strlen(out);
    snprintf(out + len, out_n - len, "%s%s", k ? ", " : "", candidates[idx[k]]);
  }
}

/* Opens path for reading without blocking (a FIFO with no writer would otherwise wait forever) and accepts
 * only a regular file: a directory, a pipe or a device is refused with a message that says which. */
static ap_status open_regular(ap_ctx *ctx, const char *path, int *fd_out) {
  *fd_out = -1;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == EISDIR) return ctx_fail(ctx, AP_IO, "%s: is a directory, expected a file", path);
    return ctx_fail(ctx, AP_IO, "%s: cannot open: %s", path, strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    ap_status st = ctx_fail(ctx, AP_IO, "%s: cannot open: %s", path, strerror(errno));
    close(fd);
    return st;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    if (S_ISDIR(sb.st_mode)) return ctx_fail(ctx, AP_IO, "%s: is a directory, expected a file", path);
    return ctx_fail(ctx, AP_IO, "%s: is not a regular file (%s), expected a file", path,
                    S_ISFIFO(sb.st_mode) ? "a pipe" : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a socket");
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *fd_out = fd;
  return AP_OK;
}

ap_status util_read_file(ap_ctx *ctx, const char *path, char **text_out, size_t *n_out) {
  if (text_out) *text_out = NULL;
  if (!path || !*path || !text_out) return ctx_fail(ctx, AP_INVALID, "util_read_file: expected a file name");
  int fd;
  ap_status st = open_regular(ctx, path, &fd);
  if (st) return st;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  bool err = false;
  while (buf) {
    if (n + 1 >= cap) {
      if (cap >= (size_t)1 << 30) {
        free(buf);
        close(fd);
        return ctx_fail(ctx, AP_IO, "%s: file larger than 1 GiB", path);
      }
      char *p = realloc(buf, cap * 2);
      if (!p) {
        free(buf);
        close(fd);
        return ctx_fail(ctx, AP_NOMEM, "%s: out of memory reading the file", path);
      }
      buf = p;
      cap *= 2;
    }
    ssize_t got = read(fd, buf + n, cap - n - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) err = true;
    if (got <= 0) break;
    n += (size_t)got;
  }
  int read_errno = errno;
  close(fd);
  if (!buf) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory reading the file", path);
  if (err) {
    free(buf);
    return ctx_fail(ctx, AP_IO, "%s: read error: %s", path, strerror(read_errno));
  }
  buf[n] = '\0';
  *text_out = buf;
  if (n_out) *n_out = n;
  return AP_OK;
}

/* ---- Writing ---------------------------------------------------------------------------------------------- */

/* Where a write to path goes. A regular file (or a name not yet taken) is replaced atomically: the text goes
 * to a temporary created exclusively (mkstemp: O_CREAT|O_EXCL, a random name, no symlink followed) beside the
 * file, then renamed over it. A symlink is resolved first, so the file it points to is replaced, not the
 * link. A non-regular target (a pipe, a terminal, /dev/stdout, "-" for standard output) is written directly,
 * never replaced. A directory is refused. */
typedef struct {
  char *real;   /* the file to replace (path, or a symlink's target); NULL for a direct write */
  int direct_fd; /* the open target of a direct write, else -1 */
  bool close_fd; /* direct_fd is ours to close ("-" borrows standard output) */
  mode_t mode;   /* the mode of the replaced file, 0644 for a new one */
} write_target;

static ap_status target_open(ap_ctx *ctx, const char *path, write_target *t) {
  t->real = NULL;
  t->direct_fd = -1;
  t->close_fd = false;
  t->mode = 0644;
  if (!path || !*path) return ctx_fail(ctx, AP_INVALID, "output: expected a file name, got an empty one");
  if (strcmp(path, "-") == 0) {
    t->direct_fd = STDOUT_FILENO;
    return AP_OK;
  }
  struct stat sb;
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    if (S_ISDIR(sb.st_mode)) return ctx_fail(ctx, AP_IO, "%s: cannot write: is a directory", path);
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking. */
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
      return ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path,
                      errno == ENXIO ? "a pipe with no reader" : strerror(errno));
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    t->direct_fd = fd;
    t->close_fd = true;
    return AP_OK;
  }
  struct stat lb;
  if (lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode)) {
    char *real = realpath(path, NULL); /* libc's allocation: copied, then released with libc's free */
    if (!real) return ctx_fail(ctx, AP_IO, "%s: cannot write: a symlink to a missing file", path);
    t->real = strdup(real);
    mem_free_libc(real);
  } else {
    t->real = strdup(path);
  }
  if (!t->real) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  if (stat(t->real, &sb) == 0) t->mode = sb.st_mode & 07777;
  return AP_OK;
}

/* Creates the temporary beside real: "DIR/.BASE.XXXXXX" with mkstemp. */
static ap_status temp_create(ap_ctx *ctx, const char *path, const char *real, char **tmp_out, int *fd_out) {
  *tmp_out = NULL;
  *fd_out = -1;
  size_t n = strlen(real);
  char *tmp = malloc(n + 16);
  if (!tmp) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  const char *slash = strrchr(real, '/');
  size_t dir_n = slash ? (size_t)(slash - real) + 1 : 0;
  memcpy(tmp, real, dir_n);
  snprintf(tmp + dir_n, n + 16 - dir_n, ".%s.XXXXXX", real + dir_n);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    ap_status st = ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(errno));
    free(tmp);
    return st;
  }
  *tmp_out = tmp;
  *fd_out = fd;
  return AP_OK;
}

static bool write_all(int fd, const void *bytes, size_t len) {
  const char *text = bytes;
  while (len > 0) {
    ssize_t w = write(fd, text, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    text += w;
    len -= (size_t)w;
  }
  return true;
}

ap_status util_check_writable(ap_ctx *ctx, const char *path) {
  write_target t;
  ap_status st = target_open(ctx, path, &t);
  if (st) return st;
  if (t.real) {
    char *tmp = NULL;
    int fd = -1;
    st = temp_create(ctx, path, t.real, &tmp, &fd);
    if (!st) {
      close(fd);
      unlink(tmp);
    }
    free(tmp);
    if (!st && access(t.real, F_OK) == 0 && access(t.real, W_OK) != 0)
      st = ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(EACCES));
  }
  if (t.close_fd) close(t.direct_fd);
  free(t.real);
  return st;
}

/* A write in progress (util_write_open): the target, and the temporary when it is replaced. */
struct util_writer {
  write_target t;
  char *tmp; /* the temporary beside t.real, NULL for a direct write */
  int fd;    /* where the bytes go: the temporary or the direct target */
  bool ok;   /* every put so far succeeded */
  int err;   /* errno of the first put that failed */
};

ap_status util_write_open(ap_ctx *ctx, const char *path, util_writer **out) {
  *out = NULL;
  util_writer *w = calloc(1, sizeof *w);
  if (!w) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path && *path ? path : "output");
  ap_status st = target_open(ctx, path, &w->t);
  if (!st && w->t.real) st = temp_create(ctx, path, w->t.real, &w->tmp, &w->fd);
  if (st) {
    if (w->t.close_fd) close(w->t.direct_fd);
    free(w->t.real);
    free(w);
    return st;
  }
  if (!w->t.real) w->fd = w->t.direct_fd;
  w->ok = true;
  *out = w;
  return AP_OK;
}

void util_write_put(util_writer *w, const void *bytes, size_t n) {
  if (w->ok && !write_all(w->fd, bytes, n)) {
    w->ok = false;
    w->err = errno;
  }
}

ap_status util_write_close(ap_ctx *ctx, const char *path, util_writer *w, bool commit) {
  bool ok = w->ok;
  int e = w->err;
  if (w->tmp) {
    if (ok && fchmod(w->fd, w->t.mode) != 0) ok = false, e = errno;
    if (close(w->fd) != 0 && ok) ok = false, e = errno;
    if (ok && commit && rename(w->tmp, w->t.real) != 0) ok = false, e = errno;
    if (!ok || !commit) unlink(w->tmp);
  } else if (w->t.close_fd && close(w->t.direct_fd) != 0 && ok) {
    ok = false, e = errno;
  }
  free(w->tmp);
  free(w->t.real);
  free(w);
  return ok ? AP_OK : ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(e));
}

ap_status util_write_file_atomic(ap_ctx *ctx, const char *path, const char *text) {
  if (!text) return ctx_fail(ctx, AP_INVALID, "%s: nothing to write", path ? path : "output");
  util_writer *w;
  ap_status st = util_write_open(ctx, path, &w);
  if (st) return st;
  util_write_put(w, text, strlen(text));
  return util_write_close(ctx, path, w, true);
}

bool util_same_file(const char *a, const char *b) {
  if (!a || !b || !*a || !*b) return false;
  struct stat sa, sb;
  if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

const char *util_relpath_problem(const char *rel) {
  if (!rel || !*rel) return "is empty";
  if (rel[0] == '/') return "is an absolute path";
  for (const char *p = rel; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return "leaves the folder (\"..\")";
    p += n;
    while (*p == '/') p++;
  }
  return NULL;
}

ap_status util_path_inside(ap_ctx *ctx, const char *base_dir, const char *rel, const char *what) {
  const char *why = util_relpath_problem(rel);
  if (why)
    return ctx_fail(ctx, AP_INVALID, "%s: \"%.200s\" %s; expected a file name inside %s", what, rel ? rel : "", why,
                    base_dir);
  /* A symlink inside the folder may still point out of it: compare the resolved paths. */
  size_t n = strlen(base_dir) + strlen(rel) + 2;
  char *joined = malloc(n);
  if (!joined) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  snprintf(joined, n, "%s/%s", base_dir, rel);
  char *rb = realpath(base_dir, NULL), *rf = realpath(joined, NULL);
  ap_status st = AP_OK;
  if (rb && rf) {
    size_t nb = strlen(rb);
    if (strncmp(rf, rb, nb) != 0 || (rf[nb] != '/' && rf[nb] != '\0'))
      st = ctx_fail(ctx, AP_INVALID, "%s: \"%.200s\" resolves outside %s (a symlink); expected a file inside it", what, rel, base_dir);
  }
  mem_free_libc(rb); /* realpath's memory is libc's */
  mem_free_libc(rf);
  free(joined);
  return st;
}

bool util_abs_path(const char *path, char *out, size_t n) {
  char *real = realpath(path, NULL); /* libc's allocation: copied, then released with libc's free */
  if (!real) return false;
  bool fits = strlen(real) < n;
  if (fits) memcpy(out, real, strlen(real) + 1);
  mem_free_libc(real);
  return fits;
}

const char *util_basename(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

bool util_ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

bool util_parse_i64(const char *s, int64_t *out) { return util_parse_count(s, false, out); }

bool util_parse_count(const char *s, bool binary, int64_t *out) {
  if (!s || !*s || !isdigit((unsigned char)*s)) return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || v <= 0) return false;
  long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = binary ? 1024 : 1000, end++;
  else if (*end == 'M') mul = binary ? 1048576 : 1000000, end++;
  else if (*end == 'G') mul = binary ? 1073741824 : 1000000000, end++;
  if (*end) return false;
  if (v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

ap_status ap_write_file(ap_ctx *ctx, const char *path, const char *text) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!path || !*path) return ctx_fail(ctx, AP_INVALID, "ap_write_file: expected a file name, got %s", path ? "\"\"" : "NULL");
  if (!text) return ctx_fail(ctx, AP_INVALID, "ap_write_file: %s: text must not be NULL", path);
  return util_write_file_atomic(ctx, path, text);
}

ap_status ap_check_writable(ap_ctx *ctx, const char *path) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!path || !*path) return ctx_fail(ctx, AP_INVALID, "ap_check_writable: expected a file name, got %s", path ? "\"\"" : "NULL");
  return util_check_writable(ctx, path);
}
