/* The arena: bump allocation in chained blocks, freed in one go (core layer). One arena serves one loaded
 * object or one planning run, so nothing inside needs its own free and nothing can leak piecemeal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

enum { ARENA_BLOCK_BYTES = 64 * 1024, ARENA_ALIGN = 16 };

typedef struct block {
  struct block *next;
  size_t cap, used;
  _Alignas(16) unsigned char data[];
} block;

struct arena {
  block *head;
  size_t used_bytes;
};

arena *arena_new(void) { return calloc(1, sizeof(arena)); }

void arena_free(arena *a) {
  if (!a) return;
  for (block *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(a);
}

void *arena_alloc(arena *a, size_t n_bytes) {
  size_t n = (n_bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (n < n_bytes) return NULL;
  block *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_BLOCK_BYTES ? n : ARENA_BLOCK_BYTES;
    b = calloc(1, sizeof(block) + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  a->used_bytes += n;
  return p;
}

char *arena_strdup(arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = arena_alloc(a, n);
  if (p) memcpy(p, s, n);
  return p;
}

char *arena_printf(arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = n < 0 ? NULL : arena_alloc(a, (size_t)n + 1);
  if (p) vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

size_t arena_used_bytes(const arena *a) { return a->used_bytes; }
