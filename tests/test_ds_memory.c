/* Tests of the memory DeepSpeed and Megatron-DeepSpeed allocate (cost/memory.c, cost/activations.c; the facts in
 * plan/stack.c [DS-*] [MDS-*]), each against bytes worked out by hand from the source's own formula: the unfused
 * attention and dropout masks of Megatron-DeepSpeed's layer (Korthikanti et al. 2022 Table 2 on a graph built
 * with flash attention and no dropout, as an HF config or runs.csv's columns give it), the pipeline engine's
 * buffers, ZeRO-1/2's reduction buckets and step copies, the BF16 optimizer's own ZeRO-1 at stage 0, and the
 * process groups the pipeline grid opens. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#include "cost_fixture.h"
#include "testmodels.h"

#include "cost/internal.h"
#include "plan/plan_api.h"
#include "plan/schedule.h"
#include "plan/stack.h"

/* A GPT on a cluster (testmodels.h; korthikanti: dropout ops and no flash attention in its graph). */
static void open_fx(env_fixture *f, int64_t l, int64_t h, int64_t a, int64_t vocab, bool korthikanti,
                    const char *cluster) {
  f->ctx = ap_ctx_new();
  f->m = test_gpt_model(f->ctx, l, h, a, vocab, korthikanti);
  env_open(f, NULL, cluster);
}

static int layer_block(const graph *g) {
  for (int i = 0; i < g->n_blocks; i++)
    if (g->blocks[i].role == BLOCK_LAYER) return i;
  return -1;
}

/* A plan on stack st with the given degrees, micro-batch b of 2048 tokens, 16 micro-batches. */
static plan plan_of(plan_stack st, int64_t tp, int64_t pp, int64_t dp, int32_t zero, plan_precision prec, int64_t b) {
  plan p;
  plan_defaults(&p);
  p.stack = st;
  p.tp = tp, p.pp = pp, p.dp = dp, p.zero_stage = zero, p.precision = prec;
  p.seq_length = 2048, p.micro_batch_size = b, p.n_micro_batches = 16;
  p.global_batch_size = b * 16 * dp;
  p.recompute = PLAN_RECOMPUTE_FULL;
  p.overlap_grad_reduce = false;
  return p;
}

static cost_result *estimate(env_fixture *f, const plan *p) {
  cost_result *r = malloc(sizeof *r);
  assert_non_null(r);
  if (cost_estimate(f->ctx, f->env, p, r)) fail_msg("%s", ap_ctx_error(f->ctx));
  return r;
}

/* Megatron-DeepSpeed's layer on a graph with flash attention and no dropout keeps what Korthikanti et al. 2022
 * Table 2 counts (its attention is unfused: the softmax output, its dropout mask and output over s×s per head,
 * 5as²b; its three dropouts keep 1-byte masks, [MDS-attn] [MDS-drop]): sbh(10 + 24/t + 5as/(ht)) without
 * recompute, sbh(10 + 24/t) with selective recompute, the 2sbh input with full recompute, and full recompute's
 * one layer recomputed in the backward is the whole layer (the "extra layer"). The same on Korthikanti's own
 * graph (dropout ops, no flash): no mask counted twice. Megatron-LM's fused attention keeps less. */
static void test_mds_layer_activations(void **state) {
  (void)state;
  const double s = 2048, b = 1, h = 12288, a = 96;
  for (int kg = 0; kg < 2; kg++) {
    env_fixture f;
    open_fx(&f, 4, (int64_t)h, (int64_t)a, 51200, kg == 1, "dgx-a100-80gb:8x8");
    int lb = layer_block(f.g);
    for (int64_t tp = 1; tp <= 8; tp *= 8) {
      plan p = plan_of(PLAN_STACK_MEGATRON_DEEPSPEED, tp, 1, 64 / tp, 1, PLAN_PREC_FP16, 1);
      plan_groups pg;
      assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
      layer_cost lc = cost_block(f.env, &p, &pg, lb, b, s);
      double t = (double)tp;
      double none = s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), sel = s * b * h * (10 + 24 / t);
      print_message("# %s graph, tp %lld: none %.6g (paper %.6g), selective %.6g (%.6g), full %.6g\n",
                    kg ? "Korthikanti's" : "flash", (long long)tp, lc.act_bytes[PLAN_RECOMPUTE_NONE], none,
                    lc.act_bytes[PLAN_RECOMPUTE_SELECTIVE], sel, lc.act_bytes[PLAN_RECOMPUTE_FULL]);
      assert_rel_close(lc.act_bytes[PLAN_RECOMPUTE_NONE], none, 0.01);
      assert_rel_close(lc.act_bytes[PLAN_RECOMPUTE_SELECTIVE], sel, 0.01);
      assert_rel_close(lc.act_bytes[PLAN_RECOMPUTE_FULL], 2 * s * b * h, 1e-12);
      assert_rel_close(lc.act_full_working_bytes, none, 0.01);
      if (kg == 0) {
        p.stack = PLAN_STACK_MEGATRON_LM;
        layer_cost lm = cost_block(f.env, &p, &pg, lb, b, s);
        assert_true(lm.act_bytes[PLAN_RECOMPUTE_NONE] < 0.8 * none);
      }
    }
    env_close(&f);
  }
}

/* The pipeline engine's buffers ([DS-pipe-buf]), by hand from engine.py: on rank r of a 1F1B pipeline of p
 * stages, min(p − r, m) micro-batches in flight each keep the stage output until their backward (the 1/tp part
 * with tp > 1, none on the last stage) and, with tp 1, the received input besides the forward's clone (none on
 * the first stage); pipe_recv_buf (all but the first stage) and grad_layer (all but the last) are kept
 * throughout, the 1/tp part each. The rest of the buffers part: Megatron's two tensor-parallel gather buffers
 * of one [b, s, h] (tp > 1) and the ZeRO-1 reduction bucket ([DS-bucket]: the flatten of min(5·10⁸, the
 * rank's parameters) 16-bit elements in Megatron-DeepSpeed's DeepSpeed, today's 5·10⁸-element buffer). Megatron-LM's pipeline keeps none of these. */
static void test_ds_pipe_buffers(void **state) {
  (void)state;
  const double s = 2048, h = 4096, b = 2;
  env_fixture f;
  open_fx(&f, 16, (int64_t)h, 32, 50304, false, "dgx-a100-80gb:8x8");
  static const struct {
    plan_stack st;
    int64_t tp;
  } cases[] = {{PLAN_STACK_MEGATRON_DEEPSPEED, 8}, {PLAN_STACK_MEGATRON_DEEPSPEED, 1}, {PLAN_STACK_DEEPSPEED, 1}};
  for (size_t c = 0; c < AP_COUNT(cases); c++) {
    const int64_t pp = 4, tp = cases[c].tp;
    plan p = plan_of(cases[c].st, tp, pp, 64 / (tp * pp), 1, PLAN_PREC_FP16, (int64_t)b);
    cost_result *r = estimate(&f, &p);
    double one = b * s * h * 2, part = one / (double)tp;
    for (int i = 0; i < r->n_ranks; i++) {
      bool first = i == 0, last = i == pp - 1;
      double in_flight = fmin((double)(pp - i), 16);
      double pipe = in_flight * ((last ? 0 : part) + (!first && tp == 1 ? one : 0)) + (first ? 0 : part) + (last ? 0 : part);
      double local_params = r->mem[i].params / 2;
      double bucket = cases[c].st == PLAN_STACK_DEEPSPEED ? 5e8 : fmin(5e8, local_params);
      double want = (tp > 1 ? 2 * one : 0) + 2 * bucket + pipe;
      print_message("# %s tp %lld rank %d: buffers %.6g, by hand %.6g (pipe %.6g)\n", plan_stack_get(p.stack)->name,
                    (long long)tp, i, r->mem[i].buffers, want, pipe);
      assert_rel_close(r->mem[i].buffers, want, 1e-9);
    }
    p.stack = PLAN_STACK_MEGATRON_LM;
    cost_result *lm = estimate(&f, &p);
    assert_rel_close(lm->mem[1].buffers, tp > 1 ? 2 * one : 0, 1e-9);
    free(lm);
    free(r);
  }
  env_close(&f);
}

/* ZeRO's gradient-reduction buffers ([DS-bucket]) on a model of fewer than 5·10⁸ parameters per rank:
 * DeepSpeed of 2022 (Megatron-DeepSpeed's row) flattens at most the rank's gradients at stage 1, whatever
 * overlap_comm says (it turns overlap and contiguous gradients off at stage 1); today's keeps the 5·10⁸-element
 * contiguous bucket, two with overlap_comm off the pipeline; ZeRO-2 keeps the bucket (two with overlap); without
 * ZeRO the fp16 optimizer's all-reduce flattens the rank's gradients, and the BF16 optimizer reduces its flat
 * fp32 accumulators in place (none). */
static void test_ds_reduction_buckets(void **state) {
  (void)state;
  env_fixture f;
  open_fx(&f, 6, 2048, 16, 50304, false, "dgx-a100-80gb:8");
  static const struct {
    plan_stack st;
    int32_t zero;
    plan_precision prec;
    bool overlap;
    double want; /* in elements; < 0: the rank's parameters */
  } cases[] = {
      {PLAN_STACK_MEGATRON_DEEPSPEED, 1, PLAN_PREC_FP16, false, -1}, {PLAN_STACK_MEGATRON_DEEPSPEED, 1, PLAN_PREC_FP16, true, -1},
      {PLAN_STACK_DEEPSPEED, 1, PLAN_PREC_FP16, false, 5e8},         {PLAN_STACK_DEEPSPEED, 1, PLAN_PREC_FP16, true, 1e9},
      {PLAN_STACK_MEGATRON_DEEPSPEED, 2, PLAN_PREC_FP16, true, 1e9}, {PLAN_STACK_DEEPSPEED, 2, PLAN_PREC_FP16, false, 5e8},
      {PLAN_STACK_MEGATRON_DEEPSPEED, 0, PLAN_PREC_FP16, false, -1}, {PLAN_STACK_MEGATRON_DEEPSPEED, 0, PLAN_PREC_BF16, false, 0},
  };
  for (size_t c = 0; c < AP_COUNT(cases); c++) {
    plan p = plan_of(cases[c].st, 1, 1, 8, cases[c].zero, cases[c].prec, 1);
    p.overlap_grad_reduce = cases[c].overlap;
    cost_result *r = estimate(&f, &p);
    double local_params = r->mem[0].params / 2;
    assert_true(local_params < 5e8);
    double want = 2 * (cases[c].want < 0 ? local_params : cases[c].want);
    print_message("# case %zu: buffers %.6g, by hand %.6g\n", c, r->mem[0].buffers, want);
    assert_rel_close(r->mem[0].buffers + 1, want + 1, 1e-9);
    free(r);
  }
  env_close(&f);
}

/* The ZeRO-1/2 step's copies ([DS-step] [DS-norm]): the local partition flattened in 16 bits and cast to fp32
 * (6 bytes per parameter of the partition), or the fp64 copy the norm takes of one gradient at a time, 8 bytes
 * per element of the largest one in the partition, where that is larger: the tied embedding of a 250,880-token
 * vocabulary split over tp 8 (the BLOOM prototypes') on the first stage outweighs the dp-8 partition's 6 bytes.
 * Megatron-LM steps in place (no copies). */
static void test_ds_step_copies(void **state) {
  (void)state;
  const double h = 8192, vocab = 250880, tp = 8;
  env_fixture f;
  open_fx(&f, 8, (int64_t)h, 64, (int64_t)vocab, false, "dgx-a100-80gb:8x8");
  plan p = plan_of(PLAN_STACK_MEGATRON_DEEPSPEED, (int64_t)tp, 2, 4, 1, PLAN_PREC_FP16, 1);
  cost_result *r = estimate(&f, &p);
  for (int i = 0; i < r->n_ranks; i++) {
    double shard = r->mem[i].optimizer / 12, embed = vocab * h / tp;
    double want = fmax(6 * shard, 8 * fmin(embed, shard));
    print_message("# rank %d: step %.6g, by hand %.6g (6 B/param %.6g, fp64 embedding %.6g)\n", i, r->mem[i].step,
                  want, 6 * shard, 8 * fmin(embed, shard));
    assert_true(8 * embed > 6 * shard); /* the case the norm copy decides */
    assert_rel_close(r->mem[i].step, want, 1e-9);
  }
  free(r);
  p.stack = PLAN_STACK_MEGATRON_LM;
  r = estimate(&f, &p);
  assert_true(r->mem[0].step == 0);
  free(r);
  env_close(&f);
}

/* Without ZeRO ([DS-bf16] [DS-step] [DS-engine]): DeepSpeed's BF16_Optimizer keeps bf16 gradients and fp32
 * accumulators for every local parameter (2 + 4 bytes) and shards the fp32 master weights and Adam's moments
 * over the data-parallel ranks itself (12/dp), stepping on its accumulators (no step copies); the fp16 optimizer
 * keeps 2-byte gradients, the 12 bytes unsharded and casts and flattens every gradient for the step (8 bytes). */
static void test_ds_optimizer_without_zero(void **state) {
  (void)state;
  env_fixture f;
  open_fx(&f, 8, 4096, 32, 50304, false, "dgx-a100-80gb:8x4");
  const double dp = 4;
  plan p = plan_of(PLAN_STACK_MEGATRON_DEEPSPEED, 8, 1, (int64_t)dp, 0, PLAN_PREC_BF16, 1);
  cost_result *r = estimate(&f, &p);
  double n = r->mem[0].params / 2;
  assert_rel_close(r->mem[0].grads, 6 * n, 1e-12);
  assert_rel_close(r->mem[0].optimizer, 12 * n / dp, 1e-12);
  assert_true(r->mem[0].step == 0);
  free(r);
  p.precision = PLAN_PREC_FP16;
  r = estimate(&f, &p);
  assert_rel_close(r->mem[0].grads, 2 * n, 1e-12);
  assert_rel_close(r->mem[0].optimizer, 12 * n, 1e-12);
  assert_rel_close(r->mem[0].step, 8 * n, 1e-12);
  free(r);
  env_close(&f);
}

/* The communicators a rank holds ([DS-groups] [MDS-groups], memory.c cost_nccl_comms), counted group by group:
 * DeepSpeed's pipeline grid with pp > 1 adds its data, model (tp·pp) and pipe groups, the slice group (tp > 1),
 * the tied embedding's group on the first and last stage and one pair per neighbour to the default group and
 * the model's tensor-parallel one; Megatron-DeepSpeed runs the grid at pp 1 too and adds Megatron's own data-
 * and pipeline-parallel groups. */
static void test_ds_groups(void **state) {
  (void)state;
  static const struct {
    int64_t tp, pp, dp;
    int rank;
    plan_stack_groups groups;
    bool tied;
    int want;
  } cases[] = {
      /* BigScience's tp 8 pp 12 dp 4, first stage: default, tp, data, model, pipe, slice, next, tied; Megatron's dp, pp */
      {8, 12, 4, 0, PLAN_GROUPS_MDS, true, 10},
      {8, 12, 4, 5, PLAN_GROUPS_MDS, true, 10},    /* a middle stage: both neighbours, no tied group */
      {8, 12, 4, 5, PLAN_GROUPS_DS_PIPE, true, 8}, /* DeepSpeed alone: no Megatron groups */
      {8, 1, 1, 0, PLAN_GROUPS_MDS, true, 3},      /* tp 8 on 8: default, tp, the model group (every rank) */
      {8, 1, 1, 0, PLAN_GROUPS_DS_PIPE, true, 1},  /* no pipeline: the plain count (tp over every rank) */
      {1, 4, 2, 3, PLAN_GROUPS_DS_PIPE, true, 6},  /* tp 1: default, data, model, pipe, previous, tied */
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p;
    plan_defaults(&p);
    p.tp = cases[i].tp, p.pp = cases[i].pp, p.dp = cases[i].dp;
    plan_stack_mem sm = {.p2p_pairs = true, .groups = cases[i].groups};
    int got = cost_nccl_comms(&p, cases[i].rank, &sm, cases[i].tied);
    if (got != cases[i].want)
      fail_msg("case %zu (tp%lld pp%lld dp%lld rank %d): %d communicators, expected %d", i, (long long)p.tp,
               (long long)p.pp, (long long)p.dp, cases[i].rank, got, cases[i].want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mds_layer_activations), cmocka_unit_test(test_ds_pipe_buffers),
      cmocka_unit_test(test_ds_reduction_buckets),  cmocka_unit_test(test_ds_step_copies),
      cmocka_unit_test(test_ds_optimizer_without_zero), cmocka_unit_test(test_ds_groups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
