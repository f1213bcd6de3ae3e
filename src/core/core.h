/* Core services shared by every module: the context, error reporting, the arena, growable strings,
 * embedded data files and small utilities. Everything here knows nothing of models, clusters or plans.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_CORE_H
#define AP_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autopar.h"
#include "core/alloc.h" /* maps malloc & co. to the context's allocator; read it before adding an allocation */

#define AP_HIDDEN __attribute__((visibility("hidden")))
#define AP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define AP_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* C's fmax, inlined: the same value for every pair of doubles but a signaling NaN, which no arithmetic
 * produces (a NaN yields the other argument; of two equal values, +0 and -0 included, the second, as glibc's
 * x86-64 fmax, which is maxsd, returns; compared bit for bit in tests/test_closed_form.c). gcc at -O2 keeps
 * fmax a libm call, which the cost model's innermost loops (the closed-form schedule, a rank's merge) pay per
 * term. */
static inline double ap_fmax(double a, double b) { return a > b || b != b ? a : b; }

/* The greatest common divisor of two non-negative integers (Euclid); ap_gcd_i64(a, 0) = a. */
static inline int64_t ap_gcd_i64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

enum { CTX_MAX_PARTS = 8 };

/* The context: holds the last error and the callbacks. One per thread of use. */
struct ap_ctx {
  ap_status status;
  char error[1024];
  ap_log_fn log_fn;
  void *log_user;
  ap_log_level log_max;
  ap_progress_fn progress_fn;
  void *progress_user;
  /* The calibration in force (a cost_calib of src/cost/calib.h, opaque here), NULL for the built-in one; owned
   * by the context when calibration_free is set (ap_ctx_set_calibration), borrowed otherwise (ctx_child). */
  void *calibration;
  void (*calibration_free)(void *);
  /* Parsed data that stays the same for the context's life (ctx_memo_get); owned when memo_owned, borrowed
   * from the parent by a child context. NULL when none could be allocated: everything works, uncached. */
  struct ctx_memo *memo;
  bool memo_owned;
  int64_t sim_max_passes; /* ap_ctx_set_simulate_limit; 0 = the default */
  /* Optional parts the host added (ap_ctx_add_part), borrowed; copied by ctx_child. */
  const ap_part *parts[CTX_MAX_PARTS];
  size_t n_parts;
  ap_alloc_fn alloc_fn; /* the host's allocator (ap_ctx_new_with_allocator), NULL for libc's; core/alloc.h */
  void *alloc_user;
};

/* An optional part (include/autopar.h "Optional parts"): a name and a table of entry points whose type the
 * module that calls it defines (model/onnx.h for "onnx", search/ilp.h for "ilp"); core only stores it. */
struct ap_part {
  const char *name;
  const void *ops;
};
/* The ops table of the part called name that the host added to ctx, or NULL when it has none. */
AP_HIDDEN const void *ctx_part_ops(const ap_ctx *ctx, const char *name);

/* Records a failure in ctx and returns status, so that callers write `return ctx_fail(ctx, AP_INVALID,
 * "%s: field must be > 0", file)`. The message is one line; a later failure replaces it. ctx may be NULL. */
AP_HIDDEN ap_status ctx_fail(ap_ctx *ctx, ap_status status, const char *fmt, ...) AP_PRINTF(3, 4);
/* A context for a sub-task whose failures should not reach ctx: the same options and callbacks, no error. */
AP_HIDDEN ap_ctx ctx_child(const ap_ctx *ctx);
/* The context's memo: parsed inputs that do not change during its life, so that they are read once per context
 * and not once per call (the cost model keeps a device's parsed GEMM profile and the built-in calibration
 * here). A child context shares its parent's memo; a context and its children are used from one thread.
 * ctx_memo_get returns the value stored under key, or NULL. ctx_memo_put hands value to the memo, which frees
 * it with free_fn (may be NULL) when the owning context is freed; it returns false, and the caller keeps
 * value, when the context has no memo or memory is short. */
AP_HIDDEN const void *ctx_memo_get(const ap_ctx *ctx, const char *key);
AP_HIDDEN bool ctx_memo_put(ap_ctx *ctx, const char *key, void *value, void (*free_fn)(void *));
/* Clears the recorded failure. */
AP_HIDDEN void ctx_clear(ap_ctx *ctx);
AP_HIDDEN void ctx_log(ap_ctx *ctx, ap_log_level level, const char *fmt, ...) AP_PRINTF(3, 4);
/* Reports progress; returns true when the caller asked to stop. */
AP_HIDDEN bool ctx_progress(ap_ctx *ctx, double fraction, const char *what);

/* ---- Arena: one per planning run or loaded object; everything in it is freed in one go. ---- */
typedef struct arena arena;
/* Returns NULL when out of memory. The caller frees it with arena_free. */
AP_HIDDEN arena *arena_new(void);
AP_HIDDEN void arena_free(arena *a);
/* Zeroed, 16-byte aligned memory owned by the arena; NULL when out of memory. */
AP_HIDDEN void *arena_alloc(arena *a, size_t n_bytes);
AP_HIDDEN char *arena_strdup(arena *a, const char *s);
AP_HIDDEN char *arena_printf(arena *a, const char *fmt, ...) AP_PRINTF(2, 3);
/* Bytes handed out so far (the arena's high-water mark, since it never frees piecemeal). */
AP_HIDDEN size_t arena_used_bytes(const arena *a);

/* ---- Growable string (heap). sb_take hands the buffer to the caller, who frees it with free(). ---- */
typedef struct {
  char *buf;
  size_t len, cap;
  bool oom;
} strbuf;
AP_HIDDEN void sb_printf(strbuf *sb, const char *fmt, ...) AP_PRINTF(2, 3);
AP_HIDDEN void sb_vprintf(strbuf *sb, const char *fmt, va_list ap);
AP_HIDDEN void sb_puts(strbuf *sb, const char *s);
/* Appends the n bytes at s (no NUL among them needed). */
AP_HIDDEN void sb_putn(strbuf *sb, const char *s, size_t n);
/* Returns the string (never NULL unless out of memory) and resets sb. */
AP_HIDDEN char *sb_take(strbuf *sb);
/* Appends first, then text broken into lines of at most width characters where it can be (after ", ", "; "
 * or "| ", the breaks of a list), each further line starting with cont, and a newline. A piece longer than
 * width between two breaks stays whole. Text output keeps its lines readable (under 120 columns) this way. */
AP_HIDDEN void sb_wrap(strbuf *sb, const char *first, const char *cont, const char *text, size_t width);
/* The widest line text output writes where it can (sb_wrap): under the 120 columns of a wide terminal. */
#define AP_TEXT_WIDTH 118
AP_HIDDEN void sb_free(strbuf *sb);

/* ---- Embedded data files (data/ compiled into the library by tools/embed.c). ---- */
typedef struct {
  const char *path; /* relative to the repository, e.g. "data/models/llama-3-70b.json" */
  const char *text; /* NUL-terminated contents */
  size_t n_bytes;
} embedded_file;
AP_HIDDEN const embedded_file *embedded_files(size_t *n_out);
/* The embedded file at exactly this path, or NULL. */
AP_HIDDEN const embedded_file *embedded_find(const char *path);

/* ---- Enum names (names.c) ---- */
/* The index of name in names[0..n-1] (exact, case-sensitive), or -1 (also for a NULL name). */
AP_HIDDEN int names_find(const char *const *names, size_t n, const char *name);

/* One enum's name table and its two functions from the enum's X-macro map, whose entries are X(ID, "name") in
 * the order of the enum's values (the enum itself is generated from the same map, so the two cannot drift):
 *   AP_ENUM_NAMES(plan_schedule, plan_schedule, PLAN_SCHEDULE_MAP, PLAN_SCHED_COUNT_)
 * defines a static table plan_schedule_names_, asserts at compile time that it has COUNT entries, and defines
 *   const char *plan_schedule_name(plan_schedule v);             "?" when v is out of range
 *   bool plan_schedule_from_name(const char *name, plan_schedule *out);   false (out untouched) when unknown
 * whose prototypes the module's header declares. STYLE.md 8: tables, not switch chains, tied by static_assert. */
#define AP_ENUM_NAME_ENTRY_(id, s) s,
/* The names of a name map as one string literal, "gpipe, 1f1b, interleaved-1f1b" (a help text or a message's
 * list of the values expected): generated from the map, so that it cannot drift from the enum. */
#define AP_ENUM_LIST_ENTRY_(e, s) ", " s
#define AP_ENUM_LIST(MAP) ((MAP(AP_ENUM_LIST_ENTRY_)) + 2)

#define AP_ENUM_NAMES(fn, type, MAP, count)                                                          \
  static const char *const fn##_names_[] = {MAP(AP_ENUM_NAME_ENTRY_)};                               \
  _Static_assert(AP_COUNT(fn##_names_) == (size_t)(count), #fn ": the name table and the enum disagree"); \
  const char *fn##_name(type v) { return (unsigned)v < (unsigned)(count) ? fn##_names_[v] : "?"; }   \
  bool fn##_from_name(const char *name, type *out) {                                                 \
    int i_ = names_find(fn##_names_, AP_COUNT(fn##_names_), name);                                   \
    if (i_ >= 0) *out = (type)i_;                                                                    \
    return i_ >= 0;                                                                                  \
  }

/* ---- Utilities ---- */
/* Levenshtein distance between two short strings (case-insensitive). */
AP_HIDDEN size_t util_edit_distance(const char *a, const char *b);
/* Writes the names of up to 3 candidates closest to `name` into out as "a, b, c" ("" when none is close). */
AP_HIDDEN void util_suggest(const char *name, const char *const *candidates, size_t n, char *out, size_t out_n);
/* Reads a whole file into a NUL-terminated heap buffer; the caller frees it. */
AP_HIDDEN ap_status util_read_file(ap_ctx *ctx, const char *path, char **text_out, size_t *n_out);
/* Writes text to path atomically: a temporary file in the same folder, then rename, so that a failure
 * never leaves a partial file. */
AP_HIDDEN ap_status util_write_file_atomic(ap_ctx *ctx, const char *path, const char *text);
/* The same for a file written piece by piece (binary files): util_write_open makes the temporary (or opens a
 * non-regular target), util_write_put appends bytes (a failure is kept and reported at the close), and
 * util_write_close renames the temporary over the target when commit is true and every put succeeded, else
 * removes it; it always frees w. */
typedef struct util_writer util_writer;
AP_HIDDEN ap_status util_write_open(ap_ctx *ctx, const char *path, util_writer **out);
AP_HIDDEN void util_write_put(util_writer *w, const void *bytes, size_t n);
AP_HIDDEN ap_status util_write_close(ap_ctx *ctx, const char *path, util_writer *w, bool commit);
/* Fails (AP_IO, one line) unless util_write_file_atomic(path) could succeed now: checked before long work. */
AP_HIDDEN ap_status util_check_writable(ap_ctx *ctx, const char *path);
/* True when both paths exist and name the same file (an output that is one of the command's inputs). */
AP_HIDDEN bool util_same_file(const char *a, const char *b);
/* AP_INVALID naming `what` unless rel is a relative path that stays inside base_dir: no "..", not
 * absolute, and no symlink that resolves outside it. */
AP_HIDDEN ap_status util_path_inside(ap_ctx *ctx, const char *base_dir, const char *rel, const char *what);
/* The lexical half of util_path_inside: NULL when rel is relative without "..", else why not ("is an
 * absolute path"). */
AP_HIDDEN const char *util_relpath_problem(const char *rel);
/* The base name of a path without folders ("a/b/c.json" -> "c.json"). */
AP_HIDDEN const char *util_basename(const char *path);
/* The absolute, resolved path of an existing file into out (n bytes): false when it does not resolve or does
 * not fit. */
AP_HIDDEN bool util_abs_path(const char *path, char *out, size_t n);
/* True when s ends with suffix. */
AP_HIDDEN bool util_ends_with(const char *s, const char *suffix);
/* Parses a strictly positive decimal integer (with optional k/M/G suffixes meaning 10^3/10^6/10^9);
 * returns false on anything else. */
AP_HIDDEN bool util_parse_i64(const char *s, int64_t *out);
/* The same with binary suffixes when binary is true: k, M and G mean 2^10, 2^20 and 2^30, as practitioners
 * count tokens of context ("8k" = 8192; plan field seq_length, PLAN_FF_BINARY_SUFFIX). */
AP_HIDDEN bool util_parse_count(const char *s, bool binary, int64_t *out);

#endif
