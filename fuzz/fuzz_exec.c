/* libFuzzer target for the executor's two readers (part "exec", src/exec/): the first byte chooses one. Even:
 * the rest is a model config file (ex_cfg_load, src/exec/ex_model.c: an HF config.json read into the
 * executor's Llama or GPT-2 config), and a config that reads is laid out by ex_model_build, whose tensors must
 * tile the flat buffer without a gap or an overlap (only for up to 64 layer-experts: the layout formats a
 * name per tensor, and 256 layers of 64 experts made one input cost 50,000 of them; sizes are not capped). Odd: the rest is a token file (ex_data_open,
 * src/exec/ex_train.c) of uint16 or uint32 tokens (bit 1 of the first byte) under a vocabulary of 1 to 65536
 * (the next two bytes); a file that reads gives tokens below the vocabulary through ex_data_batch, wrapping
 * at its end. Both read a path, so the input goes through a file first: in /dev/shm (memory) when there is
 * one, else /tmp, rewritten for each input and removed at exit (creating and removing a file on disk per input
 * was two thirds of the time). A failure must leave a one-line message. Seeds: fuzz/seeds/exec/. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/exec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool put_file(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(b, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static void check_message(ap_ctx *ctx) {
  if (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) __builtin_trap();
}

static void config(ap_ctx *ctx, const char *path) {
  ex_cfg c;
  if (ex_cfg_load(ctx, path, &c) != AP_OK) {
    check_message(ctx);
    return;
  }
  if (c.L * (c.E ? c.E : 1) > 64) return;
  ex_model m;
  if (ex_model_build(ctx, &c, &m) != AP_OK) {
    check_message(ctx);
    return;
  }
  int64_t end = 0;
  for (int i = 0; i < m.n_t; i++) {
    if (m.t[i].off != end || m.t[i].n < 0) __builtin_trap(); /* laid out in order, no gap, no overlap */
    end += m.t[i].n;
  }
  if (end != m.n_params) __builtin_trap();
  ex_model_free(&m);
}

static void tokens(ap_ctx *ctx, const char *path, int width, int64_t vocab) {
  ex_data d;
  if (ex_data_open(ctx, path, width, vocab, &d) != AP_OK) {
    check_message(ctx);
    return;
  }
  if (d.n < 2) __builtin_trap();
  int32_t in[8], labels[8];
  for (int64_t t = 0; t < 3; t++) {
    ex_data_batch(&d, t, 2, 1, 8, in, labels);
    for (int i = 0; i < 8; i++)
      if (in[i] < 0 || in[i] >= vocab || labels[i] < 0 || labels[i] >= vocab) __builtin_trap();
  }
  ex_data_free(&d);
}

static char paths[2][64]; /* the config and the token file */

static void remove_files(void) {
  for (int i = 0; i < 2; i++) remove(paths[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  if (!paths[0][0]) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(paths[0], sizeof paths[0], "%s/fuzz_exec.%ld.json", dir, (long)getpid());
    snprintf(paths[1], sizeof paths[1], "%s/fuzz_exec.%ld.bin", dir, (long)getpid());
    atexit(remove_files);
  }
  bool is_config = (data[0] & 1) == 0;
  const char *path = paths[is_config ? 0 : 1];
  size_t skip = is_config ? 1 : 3;
  if (!put_file(path, data + skip, size - skip)) return 0;
  ap_ctx *ctx = ap_ctx_new();
  if (ctx) {
    if (is_config)
      config(ctx, path);
    else
      tokens(ctx, path, data[0] & 2 ? 4 : 2, 1 + (int64_t)(data[1] | data[2] << 8));
    ap_ctx_free(ctx);
  }
  return 0;
}
