/* libFuzzer target for the reader of op-level plans, autopar-plan/2 (src/search/graph/graph_plan_read.c): bytes go
 * through jx_parse and gplan_read against a built-in op graph without layer blocks (mlp-3) on a one-axis and a
 * two-axis cluster (loaded once), so that the strict checks, the spec matching against every strategy of
 * every op and the group agreement meet whatever the parser accepts. A plan that reads is written again by the
 * planner's document writer (report/graph_plan_report.c), which must read back and write the same bytes: the
 * round trip that `autopar export --format json` promises. Seeds: fuzz/seeds/plan2/ (plans autopar wrote, one
 * edited onto a 2-axis mesh, and pipelines of 2 and 3 stages on submeshes of each cluster, edited from them and
 * written again by the writer: mlp3-*-2stages.json, mlp3-2x8-3stages.json), so that the stage checks
 * (graph_plan_read_stages.c: submeshes, meshes, devices, the ops covered in order, the stage problems' groups)
 * are fuzzed too. A plan that reads is also rendered as text and played as the pipeline timeline of `simulate`
 * (search/graph_pipe.c), which must end at a finite time. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "hw/hw.h"
#include "model/model.h"
#include "report/graph_plan_io.h"
#include "search/graph/graph_plan_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const cluster_names[] = {"h100-sxm:8", "dgx-h100:2x8"};
enum { N_CLUSTERS = sizeof cluster_names / sizeof *cluster_names };
static ap_model *model;
static ap_cluster *clusters[N_CLUSTERS];

static void load_once(void) {
  static int loaded;
  if (loaded) return;
  loaded = 1;
  ap_ctx *ctx = ap_ctx_new();
  /* Inputs that do not load would leave the target fuzzing less than it claims: stop at once. */
  if (!ctx || ap_model_load(ctx, "mlp-3", &model) != AP_OK) __builtin_trap();
  for (int i = 0; i < N_CLUSTERS; i++)
    if (ap_cluster_load(ctx, cluster_names[i], &clusters[i]) != AP_OK) __builtin_trap();
  ap_ctx_free(ctx);
}

/* Reads text against cluster c; on success writes the document again into *out (heap, or NULL). */
static ap_status read_write(ap_ctx *ctx, const char *text, size_t n, const hw_cluster *c, char **out) {
  *out = NULL;
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, "plan2.json", text, n, &root);
  if (st) return st;
  gplan_read_info info;
  gplan_result r;
  st = gplan_read(ctx, "plan2.json", root, model_graph(model), c, NULL, &info, &r);
  /* The recorded model file (export --plan reads it), written back as read. */
  const char *model_path = NULL;
  if (!st) st = gplan_read_model_path(ctx, "plan2.json", root, &model_path);
  if (!st) {
    strbuf sb = {0}, tb = {0};
    gpr_plan_write(&sb, model_graph(model), model_path, c, info.gbs, &r, true);
    *out = sb_take(&sb);
    gpr_plan_write(&tb, model_graph(model), model_path, c, info.gbs, &r, false); /* the text ap_graph_plan_render gives */
    free(sb_take(&tb));
    /* The pipeline's timeline (search/graph_pipe.c), as simulate plays it: it ends, after no pass's end. */
    gpipe_stage ps[GST_MAX_LAYERS];
    int n_ps = 0;
    int64_t n_sim = 0;
    double end_s = 0;
    if (r.n_micro <= 4096 && gpipe_stage_times(ctx, &r, ps, &n_ps, &n_sim) == AP_OK &&
        gpipe_simulate(ctx, ps, n_ps, (int64_t)r.n_micro, PLAN_SCHED_1F1B, NULL, NULL, &end_s) == AP_OK &&
        !(end_s >= 0 && end_s < INFINITY))
      __builtin_trap();
  }
  gplan_result_free(&r);
  json_decref(root);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_once();
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  for (int i = 0; i < N_CLUSTERS; i++) {
    const hw_cluster *c = hw_cluster_of(clusters[i]);
    char *first = NULL, *second = NULL;
    if (read_write(ctx, (const char *)data, size, c, &first) == AP_OK && first) {
      /* What the writer wrote must read back and be written the same again. */
      if (read_write(ctx, first, strlen(first), c, &second) != AP_OK) __builtin_trap();
      if (second && strcmp(first, second) != 0) __builtin_trap();
    }
    free(first);
    free(second);
  }
  ap_ctx_free(ctx);
  return 0;
}
