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

/* Display width: UTF-8 continuation bytes (µ, ±, …) take no column. */
static size_t cols(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

/* Ends the line: drops the space it ends with and starts the next one with cont. */
static void new_line(strbuf *sb, const char *cont) {
  if (sb->len > 0 && sb->buf && sb->buf[sb->len - 1] == ' ') sb->buf[--sb->len] = '\0';
  sb_puts(sb, "\n");
  sb_puts(sb, cont);
}

void sb_wrap(strbuf *sb, const char *first, const char *cont, const char *text, size_t width) {
  sb_puts(sb, first);
  size_t line = cols(first, strlen(first)), indent = cols(cont, strlen(cont));
  bool fresh = true; /* nothing of text on this line yet */
  for (const char *p = text; *p;) {
    /* The next piece: up to and including the next break (", ", "; ", "| "), or the rest. */
    const char *q = p;
    while (*q && !((q[0] == ',' || q[0] == ';' || q[0] == '|') && q[1] == ' ')) q++;
    size_t n = (size_t)(*q ? q + 2 - p : q - p), w = cols(p, n);
    size_t trimmed = n > 0 && p[n - 1] == ' ' ? w - 1 : w; /* a line never ends in the break's space */
    if (line + trimmed > width && (!fresh || line > indent || trimmed > width - indent)) {
      /* A piece that would leave this line less than three quarters full, or is too long for a line of its own, is
       * split at the last word that fits; otherwise the line ends before it. */
      size_t fit = 0;
      if (4 * line < 3 * width || indent + trimmed > width)
        for (size_t k = 0, c = 0; k < n && line + c <= width; c += ((unsigned char)p[k] & 0xC0) != 0x80, k++)
          if (p[k] == ' ' && line + c <= width) fit = k + 1;
      if (fit > 0) {
        sb_putn(sb, p, fit);
        p += fit;
      } else if (fresh) { /* nothing fits before the first space: the word goes whole */
        sb_putn(sb, p, n);
        p += n;
        line += w;
        fresh = false;
        continue;
      }
      new_line(sb, cont);
      line = indent;
      fresh = true;
      continue;
    }
    sb_putn(sb, p, n);
    line += w;
    fresh = false;
    p += n;
  }
  if (sb->len > 0 && sb->buf && sb->buf[sb->len - 1] == ' ') sb->buf[--sb->len] = '\0';
  sb_puts(sb, "\n");
}
