/* The allocator hook (core layer). A host may give a context its own allocator (ap_ctx_new_with_allocator,
 * one function with realloc semantics, as Lua's lua_Alloc); the library's allocations then go through it.
 *
 * How, with few line changes: this header, included by core/core.h after <stdlib.h> and <string.h>, maps the
 * library's malloc/calloc/realloc/free/strdup/strndup to mem_* below, which call the allocator installed
 * for the calling thread. Every public function installs its context's allocator on entry (API_ENTER); the
 * handle destructors and ap_free then release memory through the allocator last installed on the calling
 * thread, so a host that mixes allocators on one thread frees each handle after a call on its own context
 * (with one allocator per process or per thread nothing needs doing). Memory that a third-party library
 * allocated (jansson's json_dumps, libc's realpath) is released with mem_free_json or mem_free_libc. An
 * allocation that fails marks the thread, and ctx_fail then reports AP_NOMEM whatever status the caller
 * passed, so every failure caused by memory surfaces as AP_NOMEM. */
#ifndef AP_ALLOC_H
#define AP_ALLOC_H

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "autopar.h"

__attribute__((visibility("hidden"))) void *mem_malloc(size_t n_bytes);
__attribute__((visibility("hidden"))) void *mem_calloc(size_t n, size_t size);
__attribute__((visibility("hidden"))) void *mem_realloc(void *p, size_t n_bytes);
__attribute__((visibility("hidden"))) void mem_free(void *p);
__attribute__((visibility("hidden"))) char *mem_strdup(const char *s);
__attribute__((visibility("hidden"))) char *mem_strndup(const char *s, size_t n);
/* Releases memory that libc itself allocated (realpath's result), with libc's free. */
__attribute__((visibility("hidden"))) void mem_free_libc(void *p);
/* Releases a string that jansson allocated (json_dumps), through jansson's own free function. */
__attribute__((visibility("hidden"))) void mem_free_json(void *p);

/* json_loadb, marked as jansson's parser for a host allocator that tests failures (mem_in_json_parse): jansson
 * 2.14's parser is not safe under a failed allocation (its lexer ignores a failed buffer growth, lex_save in
 * load.c, and json_loadb may then crash), so tests/test_nomem.c fails every other allocation but not these.
 * Declared with a void * result so that this header needs no jansson. */
__attribute__((visibility("hidden"))) void *mem_json_loadb(const char *text, size_t n, size_t flags, void *error);
__attribute__((visibility("hidden"))) bool mem_in_json_parse(void);

/* Installs ctx's allocator for the calling thread (the default, libc's, when ctx is NULL or has none) and
 * clears the thread's out-of-memory mark. */
__attribute__((visibility("hidden"))) void mem_enter(const ap_ctx *ctx);
/* True when an allocation failed on this thread since the last mem_enter. */
__attribute__((visibility("hidden"))) bool mem_failed(void);

/* Installs the allocator fn (NULL: libc's) with its user pointer for the calling thread, as mem_enter does for
 * a context's; ap_ctx_new_with_allocator uses it before the context exists. */
__attribute__((visibility("hidden"))) void mem_enter_fn(ap_alloc_fn fn, void *user);

/* The first line of every public function taking a context: installs the context's allocator (mem_enter) and,
 * for the call's duration, the "C" locale on the calling thread (uselocale), so that every number the library
 * writes (printf's %g, %f, jansson's reals) and reads (strtod, jansson) has a decimal point whatever locale
 * the host set (a host that called setlocale(LC_ALL, "de_DE.UTF-8") would otherwise get "0,5" in JSON and fail
 * to read "0.5"). The host's own locale, global or per thread, is restored when the function returns: the
 * scope ends through GCC's and Clang's cleanup attribute, on every return path. The host's callbacks (log,
 * progress) run inside the call, so under "C" too. Nested public calls nest their scopes. */
typedef struct {
  locale_t prev; /* the thread's locale before the call (LC_GLOBAL_LOCALE when it had none of its own) */
} api_scope;
__attribute__((visibility("hidden"))) api_scope api_scope_enter(const ap_ctx *ctx);
__attribute__((visibility("hidden"))) void api_scope_leave(api_scope *s);
#define API_ENTER(ctx) \
  api_scope api_scope_ __attribute__((cleanup(api_scope_leave), unused)) = api_scope_enter(ctx)

/* Object-like, so that a function pointer (ctx_memo_put(…, free)) is the wrapper too. */
#ifndef AP_ALLOC_NO_MACROS
#define malloc mem_malloc
#define calloc mem_calloc
#define realloc mem_realloc
#define free mem_free
#define strdup mem_strdup
#define strndup mem_strndup
#endif

#endif
