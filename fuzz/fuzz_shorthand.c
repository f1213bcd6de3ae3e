/* libFuzzer target for the cluster shorthand parser (src/hw/cluster.c). The input's first byte picks a node
 * size (1 to 256 devices) and the rest is a spec "NAME:COUNT". The count part goes to hw_shorthand_count
 * against that node size ("h100:9223372036854775807" once overflowed a suggestion): an accepted count must
 * give 1 to HW_MAX_DEVICES devices in nodes of at most the node size, a refused one a one-line message.
 * The preset lookup before it (ap_cluster_load's name part) parses several preset files per call, a
 * millisecond under the sanitizers, which kept this target at about 100 executions per second; the presets'
 * reader is fuzzed by fuzz_cluster (cluster files naming preset nodes) and the name lookup is tested in
 * tests/test_hw.c and the bad-input catalogue. Seeds: fuzz/seeds/shorthand/. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hw/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(const ap_ctx *ctx) {
  if (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char spec[256];
  if (size < 1 || size > sizeof spec) return 0;
  int64_t dpn = (int64_t)data[0] + 1;
  memcpy(spec, data + 1, size - 1);
  spec[size - 1] = '\0';
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  const char *colon = strchr(spec, ':');
  int64_t nodes = 0, per = 0;
  if (hw_shorthand_count(ctx, spec, colon ? colon + 1 : spec, "node", dpn, &nodes, &per) == AP_OK) {
    if (nodes < 1 || per < 1 || per > dpn || nodes > HW_MAX_DEVICES / per) __builtin_trap();
  } else {
    check_message(ctx);
  }
  ap_ctx_free(ctx);
  return 0;
}
