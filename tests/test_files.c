/* File reading and writing on hostile paths (issue 9, defects 2 and 3): util_read_file refuses directories
 * and special files without blocking; util_write_file_atomic creates its temporary exclusively (a symlink
 * planted at the old predictable name OUT.tmp.<pid> is not followed), replaces the file a symlink points to
 * and keeps the link, writes a FIFO directly and refuses one without a reader at once, refuses a directory,
 * and keeps an existing file's mode; util_path_inside keeps a relative name inside its folder. Issue 19: a
 * socket is refused and a new file's mode follows the umask. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "core/core.h"

static char dir[64];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *get(const char *path) {
  char *text = NULL;
  ap_ctx *ctx = ap_ctx_new();
  if (util_read_file(ctx, path, &text, NULL)) fail_msg("%s", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  return text;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/autopar-files-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_planted_symlink_is_not_followed(void **state) {
  (void)state;
  char out[128], victim[128], planted[160];
  path_of(out, sizeof out, "out.txt");
  path_of(victim, sizeof victim, "victim.txt");
  put(victim, "precious");
  snprintf(planted, sizeof planted, "%s.tmp.%ld", out, (long)getpid()); /* the name the old writer used */
  assert_int_equal(symlink(victim, planted), 0);
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(util_write_file_atomic(ctx, out, "new text"), AP_OK);
  char *v = get(victim), *o = get(out);
  assert_string_equal(v, "precious");
  assert_string_equal(o, "new text");
  free(v);
  free(o);
  struct stat sb;
  assert_int_equal(lstat(out, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  unlink(planted);
  ap_ctx_free(ctx);
}

static void test_symlink_target_is_replaced_and_link_kept(void **state) {
  (void)state;
  char link[128], target[128];
  path_of(link, sizeof link, "link.json");
  path_of(target, sizeof target, "target.json");
  put(target, "old");
  chmod(target, 0640);
  assert_int_equal(symlink("target.json", link), 0);
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(util_write_file_atomic(ctx, link, "new"), AP_OK);
  struct stat sb;
  assert_int_equal(lstat(link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  char *t = get(target);
  assert_string_equal(t, "new");
  free(t);
  assert_int_equal(stat(target, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0640); /* the replaced file keeps its mode */
  ap_ctx_free(ctx);
}

typedef struct {
  const char *path;
  char got[64];
} reader;

static void *read_fifo(void *arg) {
  reader *r = arg;
  int fd = open(r->path, O_RDONLY);
  if (fd >= 0) {
    ssize_t n = read(fd, r->got, sizeof r->got - 1);
    if (n > 0) r->got[n] = '\0';
    close(fd);
  }
  return NULL;
}

static void test_fifo_is_written_directly(void **state) {
  (void)state;
  char fifo[128];
  path_of(fifo, sizeof fifo, "pipe");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  ap_ctx *ctx = ap_ctx_new();
  /* No reader: refused at once, not a hang. */
  assert_int_equal(util_write_file_atomic(ctx, fifo, "x"), AP_IO);
  assert_error_contains(ctx, "no reader");
  /* With a reader: written through, and the FIFO stays a FIFO. */
  reader r = {fifo, {0}};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, read_fifo, &r), 0);
  ap_status st = AP_IO;
  for (int i = 0; i < 200 && st != AP_OK; i++) { /* until the reader has opened its end */
    st = util_write_file_atomic(ctx, fifo, "through the pipe");
    if (st) nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(st, AP_OK);
  assert_string_equal(r.got, "through the pipe");
  struct stat sb;
  assert_int_equal(lstat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  /* Reading it is refused without blocking. */
  char *text = NULL;
  assert_int_equal(util_read_file(ctx, fifo, &text, NULL), AP_IO);
  assert_error_contains(ctx, "not a regular file (a pipe)");
  assert_null(text);
  ap_ctx_free(ctx);
}

static void test_directories_and_devices(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  char *text = NULL;
  assert_int_equal(util_read_file(ctx, dir, &text, NULL), AP_IO);
  assert_error_contains(ctx, "is a directory");
  assert_int_equal(util_read_file(ctx, "/dev/zero", &text, NULL), AP_IO);
  assert_error_contains(ctx, "a device");
  assert_int_equal(util_write_file_atomic(ctx, dir, "x"), AP_IO);
  assert_error_contains(ctx, "is a directory");
  /* A device is written directly and stays a device; it is reached through a link in dir, so that a
   * regression replaces the link, never /dev/null itself. */
  char null_link[128];
  path_of(null_link, sizeof null_link, "null");
  assert_int_equal(symlink("/dev/null", null_link), 0);
  assert_int_equal(util_write_file_atomic(ctx, null_link, "discarded"), AP_OK);
  struct stat sb;
  assert_int_equal(lstat(null_link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  assert_int_equal(stat("/dev/null", &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  assert_int_equal(util_write_file_atomic(ctx, "", "x"), AP_INVALID);
  ap_ctx_free(ctx);
}

/* A socket is refused (never replaced); a new file gets 0666 less the umask, as open(2) would give it. */
static void test_socket_refused_and_umask(void **state) {
  (void)state;
  char sock[128], out[128];
  path_of(sock, sizeof sock, "sock");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  assert_true(strlen(sock) < sizeof addr.sun_path);
  memcpy(addr.sun_path, sock, strlen(sock) + 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(util_write_file_atomic(ctx, sock, "x"), AP_IO);
  assert_error_contains(ctx, "is a socket");
  assert_int_equal(util_check_writable(ctx, sock), AP_IO);
  struct stat sb;
  assert_int_equal(lstat(sock, &sb), 0);
  assert_true(S_ISSOCK(sb.st_mode));
  close(fd);
  path_of(out, sizeof out, "masked.txt");
  mode_t old = umask(027);
  assert_int_equal(util_write_file_atomic(ctx, out, "x"), AP_OK);
  umask(old);
  assert_int_equal(stat(out, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0640);
  ap_ctx_free(ctx);
}

static void test_path_inside(void **state) {
  (void)state;
  char models[128], inside[160], escape[160];
  path_of(models, sizeof models, "models");
  assert_int_equal(mkdir(models, 0755), 0);
  snprintf(inside, sizeof inside, "%s/ok.json", models);
  put(inside, "{}");
  snprintf(escape, sizeof escape, "%s/out.json", models);
  assert_int_equal(symlink("/etc/hostname", escape), 0);
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(util_path_inside(ctx, models, "ok.json", "model_config"), AP_OK);
  assert_int_equal(util_path_inside(ctx, models, "missing.json", "model_config"), AP_OK); /* opening says so */
  assert_int_equal(util_path_inside(ctx, models, "../../etc/passwd", "model_config"), AP_INVALID);
  assert_error_contains(ctx, "leaves the folder");
  assert_int_equal(util_path_inside(ctx, models, "a/../../x", "model_config"), AP_INVALID);
  assert_int_equal(util_path_inside(ctx, models, "/etc/passwd", "model_config"), AP_INVALID);
  assert_error_contains(ctx, "absolute path");
  assert_int_equal(util_path_inside(ctx, models, "out.json", "model_config"), AP_INVALID);
  assert_error_contains(ctx, "resolves outside");
  assert_null(util_relpath_problem("sub/dir/x..json"));
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_planted_symlink_is_not_followed),
      cmocka_unit_test(test_symlink_target_is_replaced_and_link_kept),
      cmocka_unit_test(test_fifo_is_written_directly),
      cmocka_unit_test(test_directories_and_devices),
      cmocka_unit_test(test_socket_refused_and_umask),
      cmocka_unit_test(test_path_inside),
  };
  return cmocka_run_group_tests_name("files", tests, setup, teardown);
}
