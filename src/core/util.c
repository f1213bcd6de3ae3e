/* Small utilities: file reading and atomic writing, name suggestions, number parsing (core layer). */
#include <ctype.h>
#include <errno.h>
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
  for (size_t i = 0; i < n; i++) {
    size_t d = util_edit_distance(name, candidates[i]);
    /* A candidate that contains the name (or the reverse) is close whatever the edit distance. */
    if (strstr(candidates[i], name) || strstr(name, candidates[i])) d = d < 2 ? d : 2;
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
  size_t limit = strlen(name) / 2 + 2;
  for (size_t k = 0; k < 3; k++) {
    if (best[k] == (size_t)-1 || best[k] > limit) break;
    size_t len = strlen(out);
    snprintf(out + len, out_n - len, "%s%s", k ? ", " : "", candidates[idx[k]]);
  }
}

ap_status util_read_file(ap_ctx *ctx, const char *path, char **text_out, size_t *n_out) {
  *text_out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ctx_fail(ctx, AP_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (n + 1 >= cap) {
      if (cap >= (size_t)1 << 30) {
        free(buf);
        fclose(f);
        return ctx_fail(ctx, AP_IO, "%s: file larger than 1 GiB", path);
      }
      char *p = realloc(buf, cap * 2);
      if (!p) {
        free(buf);
        fclose(f);
        return ctx_fail(ctx, AP_NOMEM, "%s: out of memory reading the file", path);
      }
      buf = p;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  bool err = ferror(f) != 0;
  fclose(f);
  if (!buf) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory reading the file", path);
  if (err) {
    free(buf);
    return ctx_fail(ctx, AP_IO, "%s: read error", path);
  }
  buf[n] = '\0';
  *text_out = buf;
  if (n_out) *n_out = n;
  return AP_OK;
}

ap_status util_write_file_atomic(ap_ctx *ctx, const char *path, const char *text) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 32);
  if (!tmp) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    ap_status st = ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(errno));
    free(tmp);
    return st;
  }
  size_t len = strlen(text);
  bool ok = fwrite(text, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    ap_status st = ctx_fail(ctx, AP_IO, "%s: cannot write: %s", path, strerror(errno));
    remove(tmp);
    free(tmp);
    return st;
  }
  free(tmp);
  return AP_OK;
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

ap_status ap_write_file(ap_ctx *ctx, const char *path, const char *text) {
  ctx_clear(ctx);
  return util_write_file_atomic(ctx, path, text);
}
