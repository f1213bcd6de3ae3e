/* The one file writer (core layer): every file the library, the CLI and the rank program write goes through
 * util_write_open/put/close (util_write_file_atomic for a whole text), so that no failure destroys a target.
 *
 * A regular file, or a name not yet taken, is replaced atomically: the bytes go to a temporary created
 * exclusively beside it (mkstemp: O_CREAT|O_EXCL, a random name, no symlink followed), which is flushed to
 * the disk (fsync) and only then renamed over the target; the folder is synced after the rename. On any
 * failure (a full disk, a read-only file system, a write error) the temporary is removed and the target is
 * left as it was: never truncated, never removed. A symlink is resolved first, so that the file it points to
 * is replaced and the link kept. A new file gets the mode 0666 less the process's umask; a replaced file
 * keeps its mode.
 *
 * A target that is not a regular file is never replaced and never removed: a pipe (FIFO), a terminal or
 * another character device (/dev/null, /dev/full, /dev/stdout) is opened and written in place, "-" is
 * standard output; a FIFO is opened without blocking, so one with no reader is refused at once (it can
 * never hang the command). A directory, a block device and a socket are refused. util_check_writable finds,
 * before long work, every target that cannot be written now (a missing folder, no permission, a read-only
 * file system, one of the refused kinds), without writing anything and without opening a FIFO (which would
 * hand its reader an end of file). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/* Where a write to path goes. */
typedef struct {
  char *real;    /* the file to replace (path, or a symlink's target); NULL for a write in place */
  int direct_fd; /* the open target of a write in place, else -1 */
  bool close_fd; /* direct_fd is ours to close ("-" borrows standard output) */
  mode_t mode;   /* the mode of the replaced file; a new one's from the umask */
} write_target;

/* The process's umask without changing it (umask(2) can only be read by setting it, which races with other
 * threads): Linux's /proc/self/status "Umask:" line, else the common 022. */
static mode_t current_umask(void) {
  mode_t m = 022;
  FILE *f = fopen("/proc/self/status", "re");
  if (!f) return m;
  char line[128];
  while (fgets(line, sizeof line, f)) {
    unsigned v;
    if (sscanf(line, "Umask: %o", &v) == 1) {
      m = (mode_t)(v & 0777);
      break;
    }
  }
  fclose(f);
  return m;
}

/* The refusal of a target that is not a regular file, or NULL when it is written in place. */
static const char *refused_kind(mode_t m) {
  if (S_ISDIR(m)) return "is a directory";
  if (S_ISBLK(m)) return "is a block device; expected a file, a pipe or a character device";
  if (S_ISSOCK(m)) return "is a socket; expected a file, a pipe or a character device";
  return NULL;
}

/* Resolves path to its target. With probe, a FIFO is checked for permission only, not opened (see above). */
static ap_status target_open(ap_ctx *ctx, const char *path, bool probe, write_target *t) {
  t->real = NULL;
  t->direct_fd = -1;
  t->close_fd = false;
  t->mode = 0666 & ~current_umask();
  if (!path || !*path) return ctx_fail(ctx, AP_INVALID, "output: expected a file name, got an empty one");
  if (strcmp(path, "-") == 0) {
    t->direct_fd = STDOUT_FILENO;
    return AP_OK;
  }
  struct stat sb;
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    const char *why = refused_kind(sb.st_mode);
    if (why) return ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, why);
    if (probe && S_ISFIFO(sb.st_mode)) {
      if (access(path, W_OK) != 0) return ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(errno));
      return AP_OK;
    }
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking; no O_CREAT, no O_TRUNC. */
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
      return ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path,
                      errno == ENXIO && S_ISFIFO(sb.st_mode) ? "a pipe with no reader" : strerror(errno));
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

/* Creates the temporary beside real: "DIR/.BASE.XXXXXX" with mkstemp (BASE cut to 200 bytes, so that the name
 * stays within NAME_MAX whatever the target's). */
static ap_status temp_create(ap_ctx *ctx, const char *path, const char *real, char **tmp_out, int *fd_out) {
  *tmp_out = NULL;
  *fd_out = -1;
  size_t n = strlen(real) + 16;
  char *tmp = malloc(n);
  if (!tmp) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  const char *slash = strrchr(real, '/');
  size_t dir_n = slash ? (size_t)(slash - real) + 1 : 0;
  memcpy(tmp, real, dir_n);
  snprintf(tmp + dir_n, n - dir_n, ".%.200s.XXXXXX", real + dir_n);
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

/* Syncs the folder of file, so that a rename into it survives a crash (best effort: some file systems refuse
 * to sync a folder, and the data itself is already on the disk). */
static void sync_folder(const char *file) {
  const char *slash = strrchr(file, '/');
  char dir[4096];
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == file) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - file), file);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

static bool write_all(int fd, const void *bytes, size_t len) {
  const char *text = bytes;
  while (len > 0) {
    ssize_t w = write(fd, text, len);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = EIO;
    if (w <= 0) return false;
    text += w;
    len -= (size_t)w;
  }
  return true;
}

ap_status util_check_writable(ap_ctx *ctx, const char *path) {
  write_target t;
  ap_status st = target_open(ctx, path, true, &t);
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
  char *tmp; /* the temporary beside t.real, NULL for a write in place */
  int fd;    /* where the bytes go: the temporary or the target itself */
  bool ok;   /* every put so far succeeded */
  int err;   /* errno of the first put that failed */
};

ap_status util_write_open(ap_ctx *ctx, const char *path, util_writer **out) {
  *out = NULL;
  util_writer *w = calloc(1, sizeof *w);
  if (!w) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path && *path ? path : "output");
  ap_status st = target_open(ctx, path, false, &w->t);
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
    if (ok && commit && fchmod(w->fd, w->t.mode) != 0) ok = false, e = errno;
    if (ok && commit && fsync(w->fd) != 0) ok = false, e = errno;
    if (close(w->fd) != 0 && ok) ok = false, e = errno;
    if (ok && commit && rename(w->tmp, w->t.real) != 0) ok = false, e = errno;
    if (!ok || !commit) unlink(w->tmp);
    else sync_folder(w->t.real);
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
