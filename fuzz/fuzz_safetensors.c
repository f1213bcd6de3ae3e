/* libFuzzer target for the safetensors reader (src/model/safetensors.c): bytes go to st_parse. A failure must
 * leave a message in the context; a file that reads is written again with st_write (as F32), which must read
 * back with the same names, shapes and values (bit for bit: widening BF16/F16 to fp32 is exact, and F32 is
 * copied). Seeds: fuzz/seeds/safetensors/. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  st_file f;
  ap_status st = st_parse(ctx, "fuzz.safetensors", data, size, &f);
  if (st != AP_OK && !*ap_ctx_error(ctx)) __builtin_trap(); /* every failure says why */
  if (st == AP_OK && f.n <= 64) {
    st_out *o = calloc((size_t)(f.n ? f.n : 1), sizeof *o);
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_safetensors.%ld", (long)getpid());
    if (o) {
      for (int64_t i = 0; i < f.n; i++) {
        o[i].name = f.t[i].name;
        o[i].n_dims = f.t[i].n_dims;
        memcpy(o[i].shape, f.t[i].shape, sizeof o[i].shape);
        o[i].data = f.t[i].data;
      }
      st_file back;
      if (st_write(ctx, path, o, f.n) == AP_OK) {
        if (st_read(ctx, path, &back) != AP_OK) __builtin_trap();
        if (back.n != f.n) __builtin_trap();
        for (int64_t i = 0; i < f.n; i++) {
          const st_tensor *t = st_find(&back, f.t[i].name);
          if (!t || t->n_dims != f.t[i].n_dims || t->n_elems != f.t[i].n_elems ||
              memcmp(t->shape, f.t[i].shape, sizeof t->shape[0] * (size_t)t->n_dims) != 0 ||
              memcmp(t->data, f.t[i].data, sizeof(float) * (size_t)t->n_elems) != 0)
            __builtin_trap();
        }
        st_free(&back);
        remove(path);
      }
      free(o);
    }
    st_free(&f);
  }
  ap_ctx_free(ctx);
  return 0;
}
