/* Small utilities: file reading, name suggestions, paths, number parsing (core layer).
 *
 * Files are read only when they are regular files (opened non-blocking, so a FIFO cannot hang a read); the
 * allocations go through the context's allocator (core/alloc.h). Files are written by core/write.c. */
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

bool util_parse_i64(const char *s, int64_t *out) {
  if (!s || !*s || !isdigit((unsigned char)*s)) return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || v <= 0) return false;
  long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1000, end++;
  else if (*end == 'M') mul = 1000000, end++;
  else if (*end == 'G') mul = 1000000000, end++;
  if (*end) return false;
  if (v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}
