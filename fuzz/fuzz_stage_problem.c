/* libFuzzer target for the stage-problem reader (src/search/solve/problem.c): bytes go through jx_parse and
 * stp_from_json; a small problem that reads (at most 8 layers and 16 devices, so that one input stays fast) is
 * solved by the inter-op DP, whose stages must cover the layers in order on exactly n_devices at stage costs
 * that exist. Seeds: fuzz/seeds/stage_problem/. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "search/solve/solve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  json_t *root = NULL;
  if (ctx && a && jx_parse(ctx, "s.json", (const char *)data, size, &root) == AP_OK) {
    stp_problem p;
    if (stp_from_json(ctx, a, "s.json", root, &p) == AP_OK && p.n_layers <= 8 && p.n_devices <= 16 &&
        p.n_submeshes <= 8 && p.n_configs <= 4) {
      stp_stage *stages = arena_alloc(a, (size_t)p.n_layers * sizeof *stages);
      solve_opts o;
      solve_opts_init(&o);
      stp_result r = {SOLVE_INFEASIBLE, 0, 0, 0, stages, 0};
      if (stages && solve_inter_op(ctx, &p, &o, &r) == AP_OK && r.status == SOLVE_OPTIMAL) {
        int32_t next = 0, dev = 0;
        for (int32_t k = 0; k < r.n_stages; k++) {
          const stp_stage *s = &r.stages[k];
          if (s->first_layer != next || s->last_layer < s->first_layer) __builtin_trap();
          if (isnan(p.cost[stp_at(&p, s->first_layer, s->last_layer, s->submesh, s->config)])) __builtin_trap();
          dev += p.submesh_size[s->submesh];
          next = s->last_layer + 1;
        }
        if (next != p.n_layers || dev != p.n_devices) __builtin_trap();
      }
    }
    json_decref(root);
  }
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
