/* Growable heap strings for building JSON and text output (core layer). Out of memory is sticky: once
 * set, further appends do nothing and sb_take returns NULL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static bool sb_reserve(strbuf *sb, size_t extra) {
  if (sb->oom) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = realloc(sb->buf, cap);
  if (!p) {
    sb->oom = true;
    return false;
  }
  sb->buf = p;
  sb->cap = cap;
  return true;
}

void sb_vprintf(strbuf *sb, const char *fmt, va_list ap) {
  /* Format straight into the free space; only when it does not fit, grow and format again. */
  if (!sb_reserve(sb, 64)) return;
  va_list ap2;
  va_copy(ap2, ap);
  size_t room = sb->cap - sb->len;
  int n = vsnprintf(sb->buf + sb->len, room, fmt, ap);
  if (n >= 0 && (size_t)n >= room && sb_reserve(sb, (size_t)n)) n = vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap2);
  if (n >= 0 && !sb->oom) sb->len += (size_t)n;
  va_end(ap2);
}

void sb_printf(strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

void sb_puts(strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_putn(strbuf *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n)) return;
  memcpy(sb->buf + sb->len, s, n);
  sb->len += n;
  sb->buf[sb->len] = '\0';
}

char *sb_take(strbuf *sb) {
  if (!sb->oom) (void)sb_reserve(sb, 0);
  char *p = sb->oom ? NULL : sb->buf;
  if (sb->oom) free(sb->buf);
  if (p) p[sb->len] = '\0';
  *sb = (strbuf){0};
  return p;
}

void sb_free(strbuf *sb) {
  free(sb->buf);
  *sb = (strbuf){0};
}
