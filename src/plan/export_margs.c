/* The Megatron-LM argument list (plan layer): the flags of one command line, one per line with ` \`
 * continuations, and the notes (`# ...` lines) that go above it (the margs type, export.h). export_megatron.c
 * (parallelism, batch, recompute, precision) and export_megatron_model.c (the model's shape) both write into it;
 * it calls neither, so the two exporter files call one way (export_megatron.c -> export_megatron_model.c). */
#include <stdarg.h>
#include <stdio.h>

#include "plan/export.h"

void margs_flag(margs *m, const char *name, const char *value) {
  if (m->body.len) sb_puts(&m->body, " \\\n");
  sb_puts(&m->body, name);
  if (value) sb_printf(&m->body, " %s", value);
}

void margs_flag_i(margs *m, const char *name, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  margs_flag(m, name, buf);
}

void margs_note(margs *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_puts(&m->notes, "# ");
  sb_vprintf(&m->notes, fmt, ap);
  sb_puts(&m->notes, "\n");
  va_end(ap);
}
