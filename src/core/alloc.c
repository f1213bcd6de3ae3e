/* The allocator hook (core layer; the design is in core/alloc.h): the thread's installed allocator, the
 * malloc-family wrappers the library's calls are mapped to (ap_ctx_new_with_allocator, in ctx.c, installs a host's). The default
 * allocator is libc's; a host's allocator has realloc semantics (ap_alloc_fn in include/autopar.h). */
#define AP_ALLOC_NO_MACROS
#include <jansson.h>
#include <pthread.h>

#include "core/core.h"

/* Per thread, so that distinct contexts on distinct threads never see each other's allocator. */
static _Thread_local ap_alloc_fn cur_fn;
static _Thread_local void *cur_user;
static _Thread_local bool cur_failed;

void mem_enter(const ap_ctx *ctx) {
  cur_fn = ctx ? ctx->alloc_fn : NULL;
  cur_user = ctx ? ctx->alloc_user : NULL;
  cur_failed = false;
}

bool mem_failed(void) { return cur_failed; }

void *mem_malloc(size_t n_bytes) {
  if (n_bytes == 0) n_bytes = 1;
  void *p = cur_fn ? cur_fn(cur_user, NULL, n_bytes) : malloc(n_bytes);
  if (!p) cur_failed = true;
  return p;
}

void *mem_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) {
    cur_failed = true;
    return NULL;
  }
  if (!cur_fn) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) cur_failed = true;
    return p;
  }
  void *p = mem_malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void *mem_realloc(void *p, size_t n_bytes) {
  if (!p) return mem_malloc(n_bytes);
  if (n_bytes == 0) n_bytes = 1;
  void *q = cur_fn ? cur_fn(cur_user, p, n_bytes) : realloc(p, n_bytes);
  if (!q) cur_failed = true;
  return q;
}

void mem_free(void *p) {
  if (!p) return;
  if (cur_fn) (void)cur_fn(cur_user, p, 0);
  else free(p);
}

char *mem_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = mem_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

char *mem_strndup(const char *s, size_t n) {
  size_t len = 0;
  while (len < n && s[len]) len++;
  char *d = mem_malloc(len + 1);
  if (d) {
    memcpy(d, s, len);
    d[len] = '\0';
  }
  return d;
}

static _Thread_local bool cur_in_parse;

void *mem_json_loadb(const char *text, size_t n, size_t flags, void *error) {
  cur_in_parse = true;
  json_t *root = json_loadb(text, n, flags, error);
  cur_in_parse = false;
  return root;
}

bool mem_in_json_parse(void) { return cur_in_parse; }

void mem_free_libc(void *p) { free(p); }

void mem_free_json(void *p) {
  json_malloc_t m = NULL;
  json_free_t f = NULL;
  json_get_alloc_funcs(&m, &f);
  if (f) f(p);
  else free(p);
}

void mem_enter_fn(ap_alloc_fn fn, void *user) {
  cur_fn = fn;
  cur_user = user;
  cur_failed = false;
}

/* The "C" locale object of api_scope_enter, made once per process (newlocale; pthread_once so that threads
 * entering at once make one). NULL when it could not be made (out of memory): the calls then run under the
 * host's locale, as before there was a scope. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_make(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

api_scope api_scope_enter(const ap_ctx *ctx) {
  mem_enter(ctx);
  (void)pthread_once(&c_locale_once, c_locale_make);
  api_scope s = {(locale_t)0};
  if (c_locale) s.prev = uselocale(c_locale);
  return s;
}

void api_scope_leave(api_scope *s) {
  if (s->prev) uselocale(s->prev);
}
