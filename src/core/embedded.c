/* Lookup of the data files compiled into the library (core layer). The table itself is generated at build
 * time by tools/embed.c from everything under data/, so presets need no install path at run time. */
#include <string.h>

#include "core/core.h"

extern const embedded_file ap_embedded_table[];
extern const size_t ap_embedded_count;

const embedded_file *embedded_files(size_t *n_out) {
  *n_out = ap_embedded_count;
  return ap_embedded_table;
}

const embedded_file *embedded_find(const char *path) {
  for (size_t i = 0; i < ap_embedded_count; i++)
    if (strcmp(ap_embedded_table[i].path, path) == 0) return &ap_embedded_table[i];
  return NULL;
}
