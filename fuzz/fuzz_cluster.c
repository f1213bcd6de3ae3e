/* libFuzzer target for the cluster file reader (hw module): arbitrary bytes go to hw_cluster_parse. Whatever
 * the input, the reader must return a status without crashing, leaking or reading out of bounds; when it
 * accepts the input, the description it writes must load back (the description is a cluster file), and the
 * link-level queries must answer for a few group shapes. Run with `make fuzz`; seeds in fuzz/seeds/cluster/.
 * FUZZ_MAX_LEN: 2048 (fuzz-long: short inputs keep this slow reader at a useful rate) */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hw/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Group shapes to ask about: strides and sizes typical of tp, dp and pp axes. */
static const int64_t strides[] = {1, 2, 4, 8, 72};
static const int64_t sizes[] = {1, 2, 3, 8, 16, 72};

/* TUNING: the level query walks every rank; above this many devices it is skipped to keep runs fast. */
enum { MAX_QUERY_DEVICES = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  ap_cluster *cl = NULL;
  if (hw_cluster_parse(ctx, "fuzz.json", (const char *)data, size, &cl) == AP_OK) {
    char *json = NULL;
    if (ap_cluster_describe_json(ctx, cl, &json) == AP_OK) {
      ap_cluster *back = NULL;
      /* A description that does not load back is a bug in the reader or the writer. */
      if (hw_cluster_parse(ctx, "described.json", json, strlen(json), &back) != AP_OK) __builtin_trap();
      if (ap_cluster_n_devices(back) != ap_cluster_n_devices(cl)) __builtin_trap();
      ap_cluster_free(back);
    }
    ap_free(json);
    /* The text is rendered from that document (hw/cluster_text.c): it must always render. */
    char *text = NULL;
    if (ap_cluster_describe_text(ctx, cl, &text) != AP_OK && !strstr(ap_ctx_error(ctx), "out of memory")) __builtin_trap();
    ap_free(text);
    const hw_cluster *c = hw_cluster_of(cl);
    if (c->n_devices <= MAX_QUERY_DEVICES) {
      for (size_t i = 0; i < sizeof strides / sizeof *strides; i++) {
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
          hw_group_link link;
          ap_status st = hw_cluster_level_for_group(ctx, c, strides[i], sizes[k], &link);
          if (st == AP_OK && (link.level < 0 || link.level >= c->n_levels || !(link.bw_Bps > 0))) __builtin_trap();
        }
      }
      for (int64_t r = 0; r < c->n_devices; r += 97)
        if (!hw_cluster_group_of_rank(c, r)) __builtin_trap();
    }
    ap_cluster_free(cl);
  }
  ap_ctx_free(ctx);
  return 0;
}
