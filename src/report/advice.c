/* What would make a plan fit (report layer; advice.h): when no plan fits, `plan` shows its closest plans with
 * every memory saver tried on each, one at a time and then all together, each costed by the cost model so
 * that the advice and the fit test agree: ZeRO 1, 2 and 3 (each stage above the plan's), every recompute kind
 * the plan does not use yet, smaller micro-batches, ZeRO-Offload of the optimizer states and ZeRO-Infinity's
 * parameter offload to host memory, and a deeper pipeline or a wider tensor-parallel group over the same
 * devices. Only what the plan's stack runs (plan/stack.h) and what plan_validate accepts is offered. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/stack.h"
#include "report/advice.h"

/* The micro-batch count that keeps the global batch with dp data-parallel ranks of mbs sequences; 0 when it
 * does not divide. */
static int64_t micro_batches_for(const plan *p, int64_t dp, int64_t mbs) {
  int64_t per = dp * mbs;
  return per > 0 && p->global_batch_size % per == 0 ? p->global_batch_size / per : 0;
}

/* Every layer recomputed, on every chunk. */
static void full_recompute(plan *v) {
  v->recompute = PLAN_RECOMPUTE_FULL;
  v->recompute_layers = 0;
  v->n_chunk_recompute = 0;
}

/* The variant's pipeline no longer matches a stated split: the stage layers become derived again and an
 * interleaved or V schedule falls back to 1F1B (its virtual stages were sized for the old depth). */
static void reshape_pipeline(plan *v) {
  v->n_stage_layers = 0;
  v->n_chunk_recompute = 0;
  if (v->vpp > 1 || v->schedule == PLAN_SCHED_ZB_V) {
    v->vpp = 1;
    v->schedule = PLAN_SCHED_1F1B;
  }
}

typedef struct {
  plan v[ADVICE_MAX];
  char what[ADVICE_MAX][96];
  int n;
} variants;

static plan *add(variants *vs, const plan *p, const char *what) {
  if (vs->n >= ADVICE_MAX) return NULL;
  vs->v[vs->n] = *p;
  snprintf(vs->what[vs->n], sizeof vs->what[vs->n], "%s", what);
  return &vs->v[vs->n++];
}

static const char *const zero_what[4] = {"", "ZeRO 1 (shard the optimizer states)",
                                         "ZeRO 2 (shard optimizer states and gradients)",
                                         "ZeRO 3 (shard parameters, gradients and optimizer states)"};

static void list_variants(const plan *p, variants *vs) {
  bool sharded = p->dp * p->cp > 1 || plan_edp(p) > 1;
  plan *v;
  for (int z = (int)p->zero_stage + 1; z <= 3 && sharded; z++)
    if ((v = add(vs, p, zero_what[z]))) v->zero_stage = z;
  /* Recompute kinds in the order they save (plan.h): selective drops what core attention keeps, op keeps only
   * the matmul and attention outputs, full only the layer inputs; a partial full recompute extends to every
   * layer. */
  static const plan_recompute kinds[] = {PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_OP, PLAN_RECOMPUTE_FULL};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    bool partial_full = p->recompute == PLAN_RECOMPUTE_FULL && (p->recompute_layers > 0 || p->n_chunk_recompute > 0);
    if (kinds[k] < p->recompute || (kinds[k] == p->recompute && !(kinds[k] == PLAN_RECOMPUTE_FULL && partial_full)))
      continue;
    char what[96];
    snprintf(what, sizeof what, "%s recompute%s", plan_recompute_name(kinds[k]),
             kinds[k] == PLAN_RECOMPUTE_FULL ? " of every layer" : "");
    if (!(v = add(vs, p, what))) continue;
    full_recompute(v);
    v->recompute = kinds[k];
  }
  for (int64_t mbs = p->micro_batch_size / 2; mbs >= 1; mbs = mbs > 1 ? 1 : 0) {
    int64_t m = micro_batches_for(p, p->dp, mbs);
    char what[96];
    snprintf(what, sizeof what, "micro-batch size %lld", (long long)mbs);
    if (m > 0 && (v = add(vs, p, what))) v->micro_batch_size = mbs, v->n_micro_batches = m;
    if (mbs == 1) break;
  }
  if (p->offload_optimizer == PLAN_OFFLOAD_NONE && (v = add(vs, p, "optimizer states offloaded to host memory (ZeRO-Offload)"))) {
    v->offload_optimizer = PLAN_OFFLOAD_CPU;
    if (v->zero_stage < 1) v->zero_stage = 1;
  }
  if (p->offload_param == PLAN_OFFLOAD_NONE &&
      (v = add(vs, p, "parameters and optimizer states offloaded to host memory (ZeRO-Infinity, ZeRO 3)"))) {
    v->offload_param = PLAN_OFFLOAD_CPU;
    v->offload_optimizer = PLAN_OFFLOAD_CPU;
    v->zero_stage = 3;
  }
  if (p->dp % 2 == 0) {
    int64_t m = micro_batches_for(p, p->dp / 2, p->micro_batch_size);
    char what[96];
    snprintf(what, sizeof what, "pipeline parallel %lld (data parallel %lld)", (long long)(p->pp * 2), (long long)(p->dp / 2));
    if (m > 0 && (v = add(vs, p, what))) {
      v->pp *= 2, v->dp /= 2, v->n_micro_batches = m;
      reshape_pipeline(v);
    }
    snprintf(what, sizeof what, "tensor parallel %lld (data parallel %lld)", (long long)(p->tp * 2), (long long)(p->dp / 2));
    if (m > 0 && (v = add(vs, p, what))) v->tp *= 2, v->dp /= 2, v->n_micro_batches = m;
  }
  /* All the savers that keep the mesh, together. */
  if (vs->n >= 2 && (v = add(vs, p, "all of ZeRO 3, full recompute and micro-batch size 1 together"))) {
    if (sharded) v->zero_stage = 3;
    full_recompute(v);
    int64_t m = micro_batches_for(p, p->dp, 1);
    if (m > 0) v->micro_batch_size = 1, v->n_micro_batches = m;
  }
}

int advice_fixes(const cost_env *env, const plan *p, double limit, advice_fix *out) {
  variants *vs = malloc(sizeof *vs);
  cost_result *cr = malloc(sizeof *cr);
  int n = 0;
  if (!vs || !cr) {
    free(vs);
    free(cr);
    return 0;
  }
  vs->n = 0;
  list_variants(p, vs);
  plan_model_facts facts;
  plan_model_facts_of(cost_env_graph(env), &facts);
  plan_stack st = p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(facts.has_layers) : p->stack;
  for (int i = 0; i < vs->n; i++) {
    const plan *v = &vs->v[i];
    if (plan_equal(v, p) || !plan_stack_runs(st, v, NULL, 0)) continue;
    ap_ctx scratch = {0};
    if (cost_estimate(&scratch, env, v, cr) != AP_OK) continue;
    advice_fix *f = &out[n++];
    snprintf(f->change, sizeof f->change, "%s", vs->what[i]);
    f->p = *v;
    f->peak_bytes = cr->peak_mem_bytes;
    f->iter_s = cr->iter_s;
    f->host_short = cr->host_mem_bytes > cr->host_capacity_bytes;
    f->fits = cr->fits && cr->peak_mem_bytes <= limit;
  }
  free(cr);
  free(vs);
  return n;
}
