/* The context and the status table: where errors are recorded and callbacks live (core layer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static const char *const status_names[] = {
#define X(name, value, msg) [value] = msg,
    AP_STATUS_MAP(X)
#undef X
};
_Static_assert(AP_COUNT(status_names) == AP_STATUS_COUNT_, "status table and enum disagree");

const char *ap_status_str(ap_status status) {
  if ((int)status < 0 || (size_t)status >= AP_COUNT(status_names)) return "unknown status";
  return status_names[status];
}

void ap_free(void *p) { free(p); }

const char *ap_version(void) { return AP_VERSION_STRING; }

/* The memo: a short list of keyed values (a few per device type in use). */
typedef struct memo_entry {
  struct memo_entry *next;
  void *value;
  void (*free_fn)(void *);
  char key[];
} memo_entry;
struct ctx_memo {
  memo_entry *head;
};

ap_ctx *ap_ctx_new(void) {
  mem_enter(NULL); /* libc's allocator; ap_ctx_new_with_allocator (core/alloc.c) takes the host's */
  return ctx_new_here();
}

ap_ctx *ctx_new_here(void) {
  ap_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->log_max = AP_LOG_WARN;
  ctx->memo = calloc(1, sizeof *ctx->memo);
  ctx->memo_owned = ctx->memo != NULL;
  return ctx;
}

void ap_ctx_free(ap_ctx *ctx) {
  if (!ctx) return;
  mem_enter(ctx); /* freed with the allocator that made it */
  if (ctx->calibration_free) ctx->calibration_free(ctx->calibration);
  if (ctx->memo_owned) {
    for (memo_entry *e = ctx->memo->head, *next; e; e = next) {
      next = e->next;
      if (e->free_fn) e->free_fn(e->value);
      free(e);
    }
    free(ctx->memo);
  }
  free(ctx);
}

const void *ctx_memo_get(const ap_ctx *ctx, const char *key) {
  if (!ctx || !ctx->memo) return NULL;
  for (const memo_entry *e = ctx->memo->head; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e->value;
  return NULL;
}

bool ctx_memo_put(ap_ctx *ctx, const char *key, void *value, void (*free_fn)(void *)) {
  if (!ctx || !ctx->memo) return false;
  size_t n = strlen(key) + 1;
  memo_entry *e = malloc(sizeof *e + n);
  if (!e) return false;
  memcpy(e->key, key, n);
  e->value = value;
  e->free_fn = free_fn;
  e->next = ctx->memo->head;
  ctx->memo->head = e;
  return true;
}

const char *ap_ctx_error(const ap_ctx *ctx) { return ctx ? ctx->error : ""; }
ap_status ap_ctx_status(const ap_ctx *ctx) { return ctx ? ctx->status : AP_OK; }

void ap_ctx_set_log(ap_ctx *ctx, ap_log_fn fn, void *user, ap_log_level max_level) {
  if (!ctx) return;
  ctx->log_fn = fn;
  ctx->log_user = user;
  ctx->log_max = max_level;
}

void ap_ctx_set_progress(ap_ctx *ctx, ap_progress_fn fn, void *user) {
  if (!ctx) return;
  ctx->progress_fn = fn;
  ctx->progress_user = user;
}

ap_status ctx_fail(ap_ctx *ctx, ap_status status, const char *fmt, ...) {
  /* A failure that an allocation caused is reported as such (core/alloc.h), whatever the caller said. */
  const char *oom = mem_failed() && status != AP_NOMEM ? "out of memory: " : "";
  if (mem_failed()) status = AP_NOMEM;
  if (!ctx) return status;
  size_t skip = strlen(oom);
  memcpy(ctx->error, oom, skip);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->error + skip, sizeof ctx->error - skip, fmt, ap);
  va_end(ap);
  /* One line: a message must never carry a newline into a log or a terminal. */
  for (char *p = ctx->error; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  ctx->status = status;
  return status;
}

ap_ctx ctx_child(const ap_ctx *ctx) {
  ap_ctx c = ctx ? *ctx : (ap_ctx){0};
  c.status = AP_OK;
  c.error[0] = '\0';
  c.calibration_free = NULL; /* the child borrows the parent's calibration */
  c.memo_owned = false;      /* and its memo */
  return c;
}

void ctx_clear(ap_ctx *ctx) {
  if (!ctx) return;
  ctx->status = AP_OK;
  ctx->error[0] = '\0';
}

void ctx_log(ap_ctx *ctx, ap_log_level level, const char *fmt, ...) {
  if (!ctx || !ctx->log_fn || level > ctx->log_max) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ctx->log_fn(ctx->log_user, level, msg);
}

bool ctx_progress(ap_ctx *ctx, double fraction, const char *what) {
  if (!ctx || !ctx->progress_fn) return false;
  return ctx->progress_fn(ctx->progress_user, fraction, what) != 0;
}

ap_status ap_ctx_add_part(ap_ctx *ctx, const ap_part *part) {
  if (!ctx) return AP_INVALID;
  if (!part || !part->name) return ctx_fail(ctx, AP_INVALID, "ap_ctx_add_part: part must not be NULL");
  for (size_t i = 0; i < ctx->n_parts; i++)
    if (strcmp(ctx->parts[i]->name, part->name) == 0) {
      ctx->parts[i] = part;
      return AP_OK;
    }
  if (ctx->n_parts == CTX_MAX_PARTS)
    return ctx_fail(ctx, AP_NOMEM, "ap_ctx_add_part: a context holds at most %d parts", (int)CTX_MAX_PARTS);
  ctx->parts[ctx->n_parts++] = part;
  return AP_OK;
}

const char *ap_part_name(const ap_part *part) { return part && part->name ? part->name : ""; }

const void *ctx_part_ops(const ap_ctx *ctx, const char *name) {
  if (!ctx || !name) return NULL;
  for (size_t i = 0; i < ctx->n_parts; i++)
    if (strcmp(ctx->parts[i]->name, name) == 0) return ctx->parts[i]->ops;
  return NULL;
}
