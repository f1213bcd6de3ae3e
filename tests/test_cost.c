/* Tests of the cost model against the literature: activation memory per layer under TP/SP/selective/full
 * recompute (Korthikanti et al. 2022 Table 2), model-state bytes per ZeRO stage (Rajbhandari et al. 2020 §5.1)
 * and Megatron's distributed-optimizer table, the closed-form bubble against the event-driven simulator, and
 * the Chrome trace-event format of the simulator's timeline. */
#include <math.h>
#include <stdlib.h>

#include <jansson.h>

#include "testutil.h"
#include "cost_fixture.h"
#include "testmodels.h"

#include "cost/internal.h"
#include "plan/stack.h"
#include "model/model.h"
#include "plan/plan_api.h"
#include "plan/schedule.h"
#include "search/recipe/search.h"

/* A GPT layer as Korthikanti et al. assume it: 16-bit activations, 1-byte dropout masks, GeLU MLP f = 4h, no
 * flash attention. */
static ap_model *korthikanti_gpt(ap_ctx *ctx, int64_t l, int64_t h, int64_t a) {
  return test_gpt_model(ctx, l, h, a, 51200, true);
}

static int layer_block(const graph *g) {
  for (int i = 0; i < g->n_blocks; i++)
    if (g->blocks[i].role == BLOCK_LAYER) return i;
  return -1;
}

/* The first op of a layer block of the given kind (and name, unless NULL). */
static const graph_op *layer_op(const graph_block *blk, op_kind kind, const char *name) {
  for (int i = 0; i < blk->n_ops; i++)
    if (blk->ops[i].kind == kind && (!name || strcmp(blk->ops[i].name, name) == 0)) return &blk->ops[i];
  fail_msg("no %s op in the layer", name ? name : "such");
  return NULL;
}

/* Korthikanti et al. 2022 Table 2, bytes per layer per micro-batch. */
static void test_korthikanti_table2(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = korthikanti_gpt(ctx, 96, 12288, 96); /* GPT-3 175B */
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "dgx-a100-80gb:8x8", &cl), AP_OK);
  cost_env *env = NULL;
  assert_int_equal(cost_env_new(ctx, m, cl, NULL, &env), AP_OK);
  const double s = 2048, b = 1, h = 12288, a = 96;
  static const struct {
    int64_t tp;
    bool sp;
    plan_recompute rc;
  } cases[] = {
      {1, false, PLAN_RECOMPUTE_NONE},      {8, false, PLAN_RECOMPUTE_NONE},      {8, true, PLAN_RECOMPUTE_NONE},
      {8, false, PLAN_RECOMPUTE_SELECTIVE}, {8, true, PLAN_RECOMPUTE_SELECTIVE},  {4, true, PLAN_RECOMPUTE_SELECTIVE},
      {1, false, PLAN_RECOMPUTE_FULL},      {8, true, PLAN_RECOMPUTE_FULL},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p;
    plan_defaults(&p);
    p.tp = cases[i].tp;
    p.pp = 1;
    p.dp = 64 / p.tp;
    p.sequence_parallel = cases[i].sp;
    p.seq_length = (int64_t)s;
    plan_groups pg;
    assert_int_equal(cost_plan_groups(ctx, env, &p, &pg), AP_OK);
    layer_cost lc = cost_block(env, &p, &pg, layer_block(model_graph(m)), b, s);
    double t = (double)cases[i].tp, want;
    switch (cases[i].rc) {
    case PLAN_RECOMPUTE_NONE:
      want = cases[i].sp ? s * b * h * (34 / t + 5 * a * s / (h * t)) : s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
      break;
    case PLAN_RECOMPUTE_SELECTIVE:
      want = cases[i].sp ? s * b * h * 34 / t : s * b * h * (10 + 24 / t);
      break;
    default:
      want = s * b * h * 2 / (cases[i].sp ? t : 1); /* only the layer input is kept */
      break;
    }
    print_message("# tp %lld sp %d %s: %.6g bytes, Korthikanti %.6g\n", (long long)cases[i].tp, cases[i].sp,
                  plan_recompute_name(cases[i].rc), lc.act_bytes[cases[i].rc], want);
    assert_rel_close(lc.act_bytes[cases[i].rc], want, 0.01);
  }
  cost_env_free(env);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* Per-op selective checkpointing (torchtitan's selective_ac_option "op", parallelize.py _custom_policy) on a
 * Llama 3 8B layer: of the matmuls q, k, v, o, gate, up, down it keeps q, v, gate and down (every second one is
 * recomputed), plus the layer input, the attention output and flash attention's fp32 log-sum-exp per head, so
 * 2·(4h + kv + f) + 4·a bytes per token; the recompute runs k, o, up, the norms, rope and the activation again. */
static void test_op_checkpointing(void **state) {
  (void)state;
  env_fixture fx;
  env_open(&fx, "llama-3.1-8b", "dgx-h100:8");
  ap_ctx *ctx = fx.ctx;
  cost_env *env = fx.env;
  const double s = 8192, b = 2, h = 4096, kv = 1024, f = 14336, a = 32;
  plan p;
  plan_defaults(&p);
  p.dp = 8;
  p.seq_length = (int64_t)s;
  p.micro_batch_size = (int64_t)b;
  plan_groups pg;
  assert_int_equal(cost_plan_groups(ctx, env, &p, &pg), AP_OK);
  layer_cost lc = cost_block(env, &p, &pg, layer_block(fx.g), b, s);
  double want = b * s * (2 * (4 * h + kv + f) + 4 * a);
  print_message("# op checkpointing: %.6g bytes per layer, expected %.6g (none: %.6g)\n", lc.act_bytes[PLAN_RECOMPUTE_OP],
                want, lc.act_bytes[PLAN_RECOMPUTE_NONE]);
  assert_rel_close(lc.act_bytes[PLAN_RECOMPUTE_OP], want, 1e-9);
  /* The recomputed forward: at least the three dropped matmuls' share of the GEMM work (k: kv·h, o: h·h,
   * up: h·f of h·(2h + 2kv) + 3·h·f in all) of the forward outside attention (which also holds the
   * elementwise ops, all recomputed; 0.9 for GEMM efficiencies that differ by shape), less than the whole. */
  double mm_share = (kv * h + h * h + h * f) / (h * (2 * h + 2 * kv) + 3 * h * f);
  assert_true(lc.recompute_op_s > mm_share * 0.9 * (lc.fwd_s - lc.attn_fwd_s));
  assert_true(lc.recompute_op_s < lc.fwd_s);
  env_close(&fx);
}

/* Pipeline send/recv hides behind compute only in the interleaved schedule (Megatron's --overlap-p2p-comm);
 * plain 1F1B waits on every transfer. The same boundary activation either way: the exposed transfer of 1F1B
 * is the interleaved one over (1 - overlap.pp). */
static void test_p2p_overlap_by_schedule(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3-70b", "dgx-h100:8x8");
  ap_ctx *ctx = f.ctx;
  cost_env *env = f.env;
  plan p;
  plan_defaults(&p);
  p.tp = 8, p.pp = 4, p.dp = 2, p.micro_batch_size = 1, p.n_micro_batches = 16, p.global_batch_size = 32;
  p.seq_length = 4096, p.sequence_parallel = true;
  cost_result a, b;
  p.schedule = PLAN_SCHED_1F1B, p.vpp = 1;
  assert_int_equal(cost_estimate(ctx, env, &p, &a), AP_OK);
  p.schedule = PLAN_SCHED_INTERLEAVED_1F1B, p.vpp = 2;
  assert_int_equal(cost_estimate(ctx, env, &p, &b), AP_OK);
  double ov = cost_env_tuning(env)->overlap.pp_overlap;
  assert_true(a.p2p_s > 0 && ov < 1);
  assert_rel_close(a.p2p_s, b.p2p_s / (1 - ov), 1e-12);
  env_close(&f);
}

/* The host issues one kernel per op forward and two backward: with a launch cost far above the GPU time, a
 * layer takes exactly its issue time, and the weight-gradient share of the backward pass is kept. */
static void test_host_issue_bound(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "gpt2", "dgx-h100:8");
  ap_ctx *ctx = f.ctx;
  cost_env *env = f.env;
  plan p;
  plan_defaults(&p);
  p.dp = 8, p.seq_length = 1024;
  plan_groups pg;
  assert_int_equal(cost_plan_groups(ctx, env, &p, &pg), AP_OK);
  int li = layer_block(f.g);
  layer_cost gpu = cost_block(env, &p, &pg, li, 1, 1024);
  cost_tuning t = *cost_env_tuning(env);
  t.compute.op_latency_s = 1e-3; /* 1 ms per kernel: far above a GPT-2 layer's GPU time */
  cost_env_set_tuning(env, &t);
  layer_cost host = cost_block(env, &p, &pg, li, 1, 1024);
  double n_ops = (double)f.g->blocks[li].n_ops;
  assert_true(gpu.fwd_s < n_ops * 1e-3);
  assert_rel_close(host.fwd_s, n_ops * 1e-3, 1e-12);
  assert_rel_close(host.bwd_s, 2 * n_ops * 1e-3, 1e-12);
  assert_rel_close(host.wgrad_s / host.bwd_s, gpu.wgrad_s / gpu.bwd_s, 1e-12);
  env_close(&f);
}

/* An fp8 matmul pays its GEMM at the fp8 rate plus two memory-bound casts: the input before the forward GEMM
 * and the output gradient before the backward ones, 4 bytes an element each (read 2, write a row-wise and a
 * transposed fp8 copy). A bf16 matmul pays none. Each GEMM kernel also pays gemm_fixed_s (one forward, two
 * backward). */
static void test_fp8_casts(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3.1-8b", "dgx-h100:8");
  const graph_block *blk = &f.g->blocks[layer_block(f.g)];
  const graph_op *op = layer_op(blk, OP_MATMUL, "mlp_up");
  const compute_model *cm = &f.env->cm;
  const double b = 2, s = 4096, rows = b * s, k = 4096, n = 14336;
  compute_shard sh = {.tp = 1, .cp = 1, .ep = 1, .etp = 1, .gemm_dtype = HW_DTYPE_FP8};
  compute_op_time t8 = compute_op(cm, blk, op, b, s, &sh);
  double peak = cm->device.peak_flop_per_s[HW_DTYPE_FP8], bw = cm->device.mem_bw_Bps * cm->tuning.mem_eff;
  double gemm_fwd = 2 * rows * k * n / (peak * compute_gemm_eff(cm, HW_DTYPE_FP8, rows, n, k));
  double fixed = cm->tuning.gemm_fixed_s;
  assert_rel_close(t8.fwd_s, gemm_fwd + fixed + rows * k * 4 / bw, 1e-9);
  double gemm_bwd = 2 * rows * k * n / (peak * compute_gemm_eff(cm, HW_DTYPE_FP8, rows, k, n)) +
                    2 * rows * k * n / (peak * compute_gemm_eff(cm, HW_DTYPE_FP8, k, n, rows));
  assert_rel_close(t8.bwd_s, gemm_bwd + 2 * fixed + rows * n * 4 / bw, 1e-9);
  sh.gemm_dtype = HW_DTYPE_BF16;
  compute_op_time t16 = compute_op(cm, blk, op, b, s, &sh);
  double peak16 = cm->device.peak_flop_per_s[HW_DTYPE_BF16];
  assert_rel_close(t16.fwd_s, 2 * rows * k * n / (peak16 * compute_gemm_eff(cm, HW_DTYPE_BF16, rows, n, k)) + fixed,
                   1e-9);
  env_close(&f);
}

/* A grouped expert GEMM runs one GEMM per local expert (TransformerEngine's multi-stream grouped GEMM), so it
 * pays gemm_fixed_s E/ep times forward and twice that backward: 16 local experts (Qwen3-30B-A3B at ep 8) pay
 * it eight times as often as 2 (ep 64). */
static void test_grouped_gemm_fixed_per_expert(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "qwen3-30b-a3b", "dgx-h100:8");
  const graph_block *blk = NULL;
  for (int i = 0; i < f.g->n_blocks && !blk; i++)
    if (f.g->blocks[i].is_moe) blk = &f.g->blocks[i];
  assert_non_null(blk);
  const graph_op *op = layer_op(blk, OP_MATMUL, "expert_down");
  assert_true(op->n_experts == 128);
  compute_model cm = f.env->cm;
  compute_shard sh = {.tp = 1, .cp = 1, .ep = 8, .etp = 1, .gemm_dtype = HW_DTYPE_BF16};
  cm.tuning.gemm_fixed_s = 0;
  compute_op_time none8 = compute_op(&cm, blk, op, 1, 4096, &sh);
  cm.tuning.gemm_fixed_s = 1e-3;
  compute_op_time ms8 = compute_op(&cm, blk, op, 1, 4096, &sh);
  assert_rel_close(ms8.fwd_s - none8.fwd_s, 16 * 1e-3, 1e-9); /* 128 experts over ep 8: 16 per device */
  assert_rel_close(ms8.bwd_s - none8.bwd_s, 32 * 1e-3, 1e-9);
  sh.ep = 64;
  compute_op_time ms64 = compute_op(&cm, blk, op, 1, 4096, &sh);
  cm.tuning.gemm_fixed_s = 0;
  compute_op_time none64 = compute_op(&cm, blk, op, 1, 4096, &sh);
  assert_rel_close(ms64.fwd_s - none64.fwd_s, 2 * 1e-3, 1e-9);
  assert_true(ms8.fwd_s > ms64.fwd_s);
  env_close(&f);
}

/* Attention whose head dimension is not a multiple of 8 runs off the tensor cores: per FLOP it takes the vector
 * rate where an aligned one takes the fitted attention efficiency of the tensor peak (BLOOM's 225-wide heads
 * against 224-wide ones). */
static void attention_time_per_flop(int64_t h, int64_t a, double *fwd, double *bwd, double *vector, double *tensor) {
  env_fixture f;
  f.ctx = ap_ctx_new();
  f.m = korthikanti_gpt(f.ctx, 2, h, a);
  env_open(&f, NULL, "dgx-a100-80gb:8");
  const graph_block *blk = &f.g->blocks[layer_block(f.g)];
  const graph_op *op = layer_op(blk, OP_ATTENTION, NULL);
  compute_shard sh = {.tp = 1, .cp = 1, .ep = 1, .etp = 1, .gemm_dtype = HW_DTYPE_BF16};
  const compute_model *cm = &f.env->cm;
  compute_op_time t = compute_op(cm, blk, op, 1, 2048, &sh);
  op_cost c = graph_op_eval(blk, op, 1, 2048);
  *fwd = t.fwd_s / c.fwd_gemm_flop;
  *bwd = t.bwd_s / c.bwd_gemm_flop;
  *vector = 1.0 / cm->device.peak_flop_per_s[HW_DTYPE_FP32];
  *tensor = 1.0 / (cm->device.peak_flop_per_s[HW_DTYPE_BF16] * cm->tuning.attn_fwd_eff);
  env_close(&f);
}

static void test_unaligned_heads(void **state) {
  (void)state;
  double f225, b225, f224, b224, vec, tc;
  attention_time_per_flop(14400, 64, &f225, &b225, &vec, &tc);
  attention_time_per_flop(14336, 64, &f224, &b224, &vec, &tc);
  assert_rel_close(f225, vec, 1e-9);
  assert_rel_close(b225, vec, 1e-9);
  assert_rel_close(f224, tc, 1e-9);
  assert_true(f225 > 5 * f224);
}

/* Unfused attention (a stack whose attention writes its scores, plan/stack.h attn_scores: Megatron-DeepSpeed):
 * Q Kᵀ and P V at the GEMM efficiency of their shapes plus 4 forward and 7 backward 2-byte passes over the
 * a·s² scores of one micro-batch; the extra time per FLOP grows with the head count at a fixed hidden size. */
static void unfused_attention(int64_t a, double *fwd, double *bwd, double *fused_fwd) {
  env_fixture f;
  f.ctx = ap_ctx_new();
  f.m = korthikanti_gpt(f.ctx, 2, 14336, a);
  env_open(&f, NULL, "dgx-a100-80gb:8");
  const graph_block *blk = &f.g->blocks[layer_block(f.g)];
  const graph_op *op = layer_op(blk, OP_ATTENTION, NULL);
  const compute_model *cm = &f.env->cm;
  const double s = 2048, d = 14336.0 / (double)a, scores = (double)a * s * s;
  compute_shard sh = {.tp = 1, .cp = 1, .ep = 1, .etp = 1, .gemm_dtype = HW_DTYPE_FP16, .attn_scores = true};
  compute_op_time t = compute_op(cm, blk, op, 1, s, &sh);
  op_cost c = graph_op_eval(blk, op, 1, s);
  double pk = cm->device.peak_flop_per_s[HW_DTYPE_FP16], bw = cm->device.mem_bw_Bps * cm->tuning.mem_eff;
  double eff = 0.5 * (compute_gemm_eff(cm, HW_DTYPE_FP16, s, s, d) + compute_gemm_eff(cm, HW_DTYPE_FP16, s, d, s));
  double vec = cm->device.peak_flop_per_s[HW_DTYPE_FP32];
  assert_rel_close(t.fwd_s, c.fwd_gemm_flop / (pk * eff) + 8 * scores / bw + c.fwd_vector_flop / vec, 1e-9);
  assert_rel_close(t.bwd_s, c.bwd_gemm_flop / (pk * eff) + 14 * scores / bw + (c.dgrad_flop - c.bwd_gemm_flop) / vec,
                   1e-9);
  *fwd = t.fwd_s / c.fwd_gemm_flop;
  *bwd = t.bwd_s / c.bwd_gemm_flop;
  sh.attn_scores = false;
  *fused_fwd = compute_op(cm, blk, op, 1, s, &sh).fwd_s / c.fwd_gemm_flop;
  env_close(&f);
}

static void test_unfused_attention(void **state) {
  (void)state;
  double f64, b64, ff64, f128, b128, ff128;
  unfused_attention(64, &f64, &b64, &ff64);
  unfused_attention(128, &f128, &b128, &ff128);
  assert_true(f128 > f64 && b128 > b64);  /* more heads, more score bytes per FLOP */
  assert_rel_close(ff128, ff64, 1e-9);    /* a flash kernel's time per FLOP does not see the head count */
  const plan_stack_info *mds = plan_stack_get(PLAN_STACK_MEGATRON_DEEPSPEED), *mlm = plan_stack_get(PLAN_STACK_MEGATRON_LM);
  assert_true(mds->attn_scores && !mlm->attn_scores);
  assert_true(mds->pp_sync_after && plan_stack_get(PLAN_STACK_DEEPSPEED)->pp_sync_after && !mlm->pp_sync_after);
  assert_true(plan_stack_get(PLAN_STACK_LLM_FOUNDRY)->attn_sm80 && plan_stack_get(PLAN_STACK_TORCHTITAN)->attn_sm80);
  assert_false(mlm->attn_sm80 || plan_stack_get(PLAN_STACK_MEGATRON_BRIDGE)->attn_sm80);
}

/* FlashAttention-2 (plan/stack.h attn_sm80) on a Hopper chip runs at 35/75 of the native kernel's rate; on an
 * Ampere chip it is the native kernel. Long sequences keep the attention compute-bound. */
static double fa2_over_native(const char *cluster) {
  env_fixture f;
  env_open(&f, "llama-3.1-8b", cluster);
  const graph_block *blk = &f.g->blocks[layer_block(f.g)];
  const graph_op *op = layer_op(blk, OP_ATTENTION, NULL);
  compute_shard sh = {.tp = 1, .cp = 1, .ep = 1, .etp = 1, .gemm_dtype = HW_DTYPE_BF16};
  double native = compute_op(&f.env->cm, blk, op, 1, 8192, &sh).fwd_s;
  sh.attn_sm80 = true;
  double fa2 = compute_op(&f.env->cm, blk, op, 1, 8192, &sh).fwd_s;
  env_close(&f);
  return fa2 / native;
}

static void test_fa2_on_hopper(void **state) {
  (void)state;
  assert_rel_close(fa2_over_native("dgx-h100:8"), 0.75 / 0.35, 1e-9);
  assert_rel_close(fa2_over_native("dgx-a100-80gb:8"), 1.0, 1e-9);
}

/* The loss's memory on the last rank: loss_bytes_per_logit per logit element less the 16-bit logits the head
 * keeps among its activations, or with a fused in-place loss (stack any) one fp32 log-sum-exp per token
 * (each stack's own: tests/test_loss.c). */
static void test_loss_memory(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3.1-8b", "dgx-h100:8");
  ap_ctx *ctx = f.ctx;
  cost_env *env = f.env;
  plan p;
  plan_defaults(&p);
  p.tp = 2, p.dp = 4, p.sequence_parallel = true, p.seq_length = 8192, p.micro_batch_size = 2;
  p.n_micro_batches = 1, p.global_batch_size = 8;
  cost_result r;
  assert_int_equal(cost_estimate(ctx, env, &p, &r), AP_OK);
  double tokens = 2.0 * 8192, vocab = 128256;
  double per_logit = cost_env_tuning(env)->memory.loss_bytes_per_logit - 2;
  assert_rel_close(r.mem[0].logits, tokens * vocab / 2 * per_logit, 1e-12);
  p.fused_loss = true, p.stack = PLAN_STACK_ANY;
  assert_int_equal(cost_estimate(ctx, env, &p, &r), AP_OK);
  assert_rel_close(r.mem[0].logits, tokens * 4.0, 1e-12);
  env_close(&f);
}

/* Model-state bytes per parameter: Megatron's table (bf16 params, fp32 grads: 18 unsharded, 6 + 12/d with the
 * distributed optimizer) and the ZeRO paper's stages with 16-bit gradients (2+2+12 = 16; 4 + 12/N_d;
 * 2 + 14/N_d; 16/N_d). */
static void test_zero_model_states(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "llama-3-8b", &m), AP_OK);
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "h100:64", &cl), AP_OK);
  static const struct {
    double grad_bytes;
    int zero;
    double want_per_param_at_d64;
  } cases[] = {
      {4, 0, 18.0}, {4, 1, 6.0 + 12.0 / 64}, /* Megatron dist_optimizer.md */
      {2, 0, 16.0}, {2, 1, 4.0 + 12.0 / 64}, {2, 2, 2.0 + 14.0 / 64}, {2, 3, 16.0 / 64}, /* ZeRO §5.1, K = 12 */
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    cost_tuning t = cost_tuning_defaults();
    t.memory.grad_bytes_per_param = cases[i].grad_bytes;
    cost_env *env = NULL;
    assert_int_equal(cost_env_new(ctx, m, cl, &t, &env), AP_OK);
    plan p;
    plan_defaults(&p);
    p.stack = PLAN_STACK_AUTOPAR; /* the stack whose gradient width is the tuning's */
    p.dp = 64;
    p.zero_stage = cases[i].zero;
    rank_cost rc = {0};
    rc.params_dense = 1e9;
    cost_mem mem = memory_rank(env, &p, &rc, 0, 1, 1024);
    double per = (mem.params + mem.grads + mem.optimizer) / 1e9;
    assert_rel_close(per, cases[i].want_per_param_at_d64, 1e-12);
    cost_env_free(env);
  }
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* The stacks' model-state bytes per parameter (plan/stack.c), ZeRO-1 over 64 ranks: Megatron-LM's fp32 main
 * grads with bf16 (2 + 4 + 12/64), its fp16 gradients (2 + 2 + 12/64), Megatron-Bridge's bf16 reduction
 * (2 + 2 + 12/64), DeepSpeed's ZeRO optimizer, which runs bf16 as fp16 (2 + 2 + 12/64; engine.py), and without
 * ZeRO its BF16 optimizer (bf16 grads plus an unsharded fp32 copy, and master weights and moments it shards
 * over the data-parallel ranks itself: 2 + 2 + 4 + 12/64; stack.c [DS-bf16]; its FP16_Optimizer shards none),
 * torchtitan's FSDP2 (ZeRO-3, fp32 reduce: (2 + 4 + 12)/64, plus 4 unsharded with pp > 1). */
static void test_stack_model_states(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "llama-3-8b", &m), AP_OK);
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "h100:128", &cl), AP_OK);
  static const struct {
    plan_stack stack;
    plan_precision prec;
    int zero;
    int64_t pp;
    double want;
  } cases[] = {
      {PLAN_STACK_MEGATRON_LM, PLAN_PREC_BF16, 1, 1, 6.0 + 12.0 / 64},
      {PLAN_STACK_MEGATRON_LM, PLAN_PREC_FP16, 1, 1, 4.0 + 12.0 / 64},
      {PLAN_STACK_DEFAULT, PLAN_PREC_BF16, 1, 1, 6.0 + 12.0 / 64}, /* a transformer's default: megatron-lm */
      {PLAN_STACK_MEGATRON_BRIDGE, PLAN_PREC_BF16, 1, 1, 4.0 + 12.0 / 64},
      {PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_PREC_BF16, 1, 1, 4.0 + 12.0 / 64},
      {PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_PREC_BF16, 0, 1, 8.0 + 12.0 / 64},
      {PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_PREC_FP16, 0, 1, 16.0},
      {PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_PREC_FP16, 1, 1, 4.0 + 12.0 / 64},
      {PLAN_STACK_TORCHTITAN, PLAN_PREC_BF16, 3, 1, 18.0 / 64},
      {PLAN_STACK_TORCHTITAN, PLAN_PREC_BF16, 3, 2, 18.0 / 64 + 4.0},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    cost_env *env = NULL;
    assert_int_equal(cost_env_new(ctx, m, cl, NULL, &env), AP_OK);
    plan p;
    plan_defaults(&p);
    p.stack = cases[i].stack;
    p.precision = cases[i].prec;
    p.dp = 64;
    p.pp = cases[i].pp;
    p.zero_stage = cases[i].zero;
    rank_cost rc = {0};
    rc.params_dense = 1e9;
    cost_mem mem = memory_rank(env, &p, &rc, 0, 1, 1024);
    assert_rel_close((mem.params + mem.grads + mem.optimizer) / 1e9, cases[i].want, 1e-12);
    cost_env_free(env);
  }
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* The simulated pipeline time of p with the chunk times of r (the test fails on an error). */
static double simulate(const plan *p, const cost_result *r) {
  ap_ctx *ctx = ap_ctx_new();
  double t = NAN;
  if (sim_pipeline(ctx, p, r, 0, NULL, NULL, &t)) fail_msg("%s", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  return t;
}

/* On uniform chunks with free send/recv, the simulator reproduces the closed forms: (m + p - 1)·t for GPipe
 * and 1F1B, m·t + (p - 1)·t/v for interleaved 1F1B (Narayanan et al. 2021 §2.2). */
static void test_closed_form_equals_simulation(void **state) {
  (void)state;
  static const struct {
    int64_t pp, v, m;
    plan_schedule s;
  } cases[] = {
      {4, 1, 8, PLAN_SCHED_1F1B},  {8, 1, 32, PLAN_SCHED_1F1B}, {4, 1, 2, PLAN_SCHED_1F1B},
      {4, 1, 8, PLAN_SCHED_GPIPE}, {4, 2, 8, PLAN_SCHED_INTERLEAVED_1F1B}, {8, 2, 32, PLAN_SCHED_INTERLEAVED_1F1B},
      {4, 4, 16, PLAN_SCHED_INTERLEAVED_1F1B}, {2, 5, 10, PLAN_SCHED_INTERLEAVED_1F1B},
  };
  static cost_result r;
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p;
    plan_defaults(&p);
    p.pp = cases[i].pp;
    p.vpp = cases[i].v;
    p.n_micro_batches = cases[i].m;
    p.schedule = cases[i].s;
    memset(&r, 0, sizeof r);
    rank_cost rc[16] = {{0}};
    for (int64_t c = 0; c < p.pp * p.vpp; c++) {
      r.chunk_tf_s[c] = 1.0 / (double)p.vpp;
      r.chunk_tb_s[c] = 2.0 / (double)p.vpp;
      r.chunk_tw_s[c] = 1.0 / (double)p.vpp;
    }
    for (int64_t k = 0; k < p.pp; k++) rc[k] = (rank_cost){.tf = 1, .tb = 2, .tw = 1};
    cost_time t = {0};
    double closed = schedule_time_s(&p, rc, (int)p.pp, &t);
    double sim = simulate(&p, &r);
    double m = (double)p.n_micro_batches, pp = (double)p.pp, v = (double)p.vpp;
    double textbook = p.schedule == PLAN_SCHED_INTERLEAVED_1F1B ? m * 3 + (pp - 1) * 3 / v : (m + pp - 1) * 3;
    assert_rel_close(closed, textbook, 1e-12);
    assert_rel_close(sim, closed, 1e-9);
  }
}

/* The simulator handles uneven chunks: the slowest chunk sets the pace. */
static void test_simulator_uneven(void **state) {
  (void)state;
  plan p;
  plan_defaults(&p);
  p.pp = 4;
  p.n_micro_batches = 16;
  static cost_result r;
  memset(&r, 0, sizeof r);
  double tf[4] = {1.2, 1.0, 1.0, 1.5};
  rank_cost rc[4];
  for (int c = 0; c < 4; c++) {
    r.chunk_tf_s[c] = tf[c];
    r.chunk_tb_s[c] = 2 * tf[c];
    rc[c] = (rank_cost){.tf = tf[c], .tb = 2 * tf[c]};
  }
  cost_time t = {0};
  double closed = schedule_time_s(&p, rc, 4, &t);
  double sim = simulate(&p, &r);
  /* Σ t_r + (m - 1)·max t_r = 14.1 + 15·4.5 */
  assert_rel_close(closed, 14.1 + 15 * 4.5, 1e-12);
  assert_true(sim >= 16 * 4.5 - 1e-9); /* never faster than the bottleneck */
  assert_rel_close(sim, closed, 0.05);
}

/* The trace is a Chrome trace-event document: an object with a traceEvents array whose complete events ("X")
 * carry name, ph, ts, dur, pid and tid with the right types, and metadata events ("M") name threads. */
static void test_trace_event_schema(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  ap_plan *ap = NULL;
  assert_int_equal(ap_model_load(ctx, "llama-3-8b", &m), AP_OK);
  assert_int_equal(ap_cluster_load(ctx, "h100:16", &cl), AP_OK);
  assert_int_equal(ap_plan_new(ctx, &ap), AP_OK);
  const char *kv[][2] = {{"tp", "2"}, {"pp", "4"}, {"gbs", "64"}, {"seq", "4096"}, {"sp", "1"}};
  for (size_t i = 0; i < AP_COUNT(kv); i++) assert_int_equal(ap_plan_set(ctx, ap, kv[i][0], kv[i][1]), AP_OK);
  char path[] = "/tmp/autopar-trace-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  char *out = NULL;
  if (ap_simulate(ctx, m, cl, ap, path, AP_OUT_JSON, &out)) fail_msg("%s", ap_ctx_error(ctx));
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) fail_msg("trace is not JSON: %s at %d:%d", err.text, err.line, err.column);
  json_t *evs = json_object_get(root, "traceEvents");
  assert_true(json_is_array(evs));
  size_t i, n_x = 0;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    assert_non_null(ph);
    assert_true(json_is_string(json_object_get(e, "name")));
    assert_true(json_is_integer(json_object_get(e, "pid")));
    if (strcmp(ph, "X") == 0) {
      n_x++;
      assert_true(json_is_integer(json_object_get(e, "tid")));
      assert_true(json_is_number(json_object_get(e, "ts")) && json_number_value(json_object_get(e, "ts")) >= 0);
      assert_true(json_is_number(json_object_get(e, "dur")) && json_number_value(json_object_get(e, "dur")) >= 0);
    } else {
      assert_string_equal(ph, "M");
      assert_true(json_is_object(json_object_get(e, "args")));
    }
  }
  /* 4 stages × 16 micro-batches × (F + B) compute events at least. */
  assert_true(n_x >= 4 * 16 * 2);
  json_decref(root);
  remove(path);
  ap_free(out);
  ap_plan_free(ap);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* Sizes come from the graph's tensors: a general graph (no hidden_size) pays its pipeline send/recv, the
 * boundary being the largest output of a pipeline unit; a transformer's is its [b, s, h] 16-bit layer output. */
static void test_pipeline_send_from_tensors(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "data/models/examples/resnet-tiny.json", "dgx-h100:2x1");
  plan p;
  plan_defaults(&p);
  p.pp = 2;
  p.global_batch_size = 8;
  ap_plan ap = {.p = p};
  plan_resolve(&ap, 2);
  cost_result r;
  assert_int_equal(cost_estimate(f.ctx, f.env, &ap.p, &r), AP_OK);
  assert_true(r.p2p_s > 0);
  assert_true(r.time.pp_comm > 0);
  assert_true(cost_boundary_bytes(f.env, &ap.p, 1, 1, true) > 0);
  env_close(&f);

  env_open(&f, "llama-3-8b", "h100:8");
  plan_defaults(&ap.p);
  ap.p.tp = 2;
  ap.p.sequence_parallel = true;
  ap.p.cp = 2;
  /* [b, s/cp, h] bf16 over tp with sequence parallelism; h = 4096. */
  assert_rel_close(cost_boundary_bytes(f.env, &ap.p, 2, 8192, true), 2.0 * 8192 / 2 * 4096 * 2 / 2, 1e-12);
  assert_rel_close(cost_boundary_bytes(f.env, &ap.p, 2, 8192, false), 2.0 * 8192 / 2 * 4096 * 2, 1e-12);
  env_close(&f);
}

/* The environment is read once per context: the device profile and the built-in calibration sit in the
 * context's memo after the first environment, and a second environment gets the same GEMM table. */
static void test_env_parsed_once_per_context(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3-8b", "h200:8");
  const void *prof = ctx_memo_get(f.ctx, "cost.profile:data/profiles/h200.json");
  assert_non_null(prof);
  assert_non_null(ctx_memo_get(f.ctx, "cost.calibration:builtin"));
  cost_env *again = NULL;
  assert_int_equal(cost_env_new(f.ctx, f.m, f.cl, NULL, &again), AP_OK);
  assert_ptr_equal(ctx_memo_get(f.ctx, "cost.profile:data/profiles/h200.json"), prof);
  plan p;
  plan_defaults(&p);
  ap_plan ap = {.p = p};
  ap.p.global_batch_size = 64;
  plan_resolve(&ap, 8);
  cost_result r1, r2;
  assert_int_equal(cost_estimate(f.ctx, f.env, &ap.p, &r1), AP_OK);
  assert_int_equal(cost_estimate(f.ctx, again, &ap.p, &r2), AP_OK);
  assert_true(r1.iter_s == r2.iter_s);
  cost_env_free(again);
  /* A context without a memo (a zeroed one) still works, uncached. */
  ap_ctx bare = {0};
  assert_int_equal(cost_env_new(&bare, f.m, f.cl, NULL, &again), AP_OK);
  assert_int_equal(cost_estimate(&bare, again, &ap.p, &r2), AP_OK);
  assert_true(r1.iter_s == r2.iter_s);
  cost_env_free(again);
  env_close(&f);
}

/* Every schedule kind completes for every shape a plan may take, with sends that cost more than a pass (the
 * pipeline ranks on different nodes): the simulator runs the schedule's orders (plan/schedule.h), never stalls,
 * and never beats the slowest stage's own work. Issue 9 defect 5: ZB-V with pp 2 and 4 or more micro-batches
 * across nodes stopped ("did not complete"). */
static void test_every_schedule_completes(void **state) {
  (void)state;
  static const plan_schedule kinds[] = {PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B, PLAN_SCHED_ZB_H1,
                                        PLAN_SCHED_ZB_V};
  static cost_result r;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t k = 0; k < AP_COUNT(kinds); k++)
    for (int64_t pp = 2; pp <= 8; pp *= 2)
      for (int64_t v = 1; v <= 3; v++)
        for (int64_t m = 1; m <= 17; m++) {
          plan p;
          plan_defaults(&p);
          p.pp = pp;
          p.vpp = v;
          p.n_micro_batches = m;
          p.schedule = kinds[k];
          if ((p.schedule == PLAN_SCHED_INTERLEAVED_1F1B) != (v > 1) && p.schedule != PLAN_SCHED_ZB_V) continue;
          if (p.schedule == PLAN_SCHED_ZB_V && v != 2) continue;
          if (p.schedule == PLAN_SCHED_INTERLEAVED_1F1B && m % pp != 0) continue;
          for (int p2p = 0; p2p < 2; p2p++) {
            memset(&r, 0, sizeof r);
            double max_stage = 0, stage[8] = {0};
            for (int64_t c = 0; c < pp * v; c++) {
              r.chunk_tf_s[c] = 1.0 + 0.1 * (double)(c % 3);
              r.chunk_tb_s[c] = 2.0 + 0.3 * (double)(c % 2);
              r.chunk_tw_s[c] = 0.8;
              stage[plan_chunk_rank(&p, c)] += r.chunk_tf_s[c] + r.chunk_tb_s[c];
            }
            for (int64_t i = 0; i < pp; i++) max_stage = fmax(max_stage, stage[i]);
            r.p2p_s = p2p ? 3.0 : 0.0;
            double t = NAN;
            if (sim_pipeline(ctx, &p, &r, 0, NULL, NULL, &t))
              fail_msg("%s pp %lld vpp %lld m %lld p2p %d: %s", plan_schedule_name(p.schedule), (long long)pp,
                       (long long)v, (long long)m, p2p, ap_ctx_error(ctx));
            assert_true(isfinite(t));
            assert_true(t >= (double)m * max_stage - 1e-9);
          }
        }
  /* Past the pass limit: one line naming the count, the limit and the option, before any memory is taken. */
  plan big;
  plan_defaults(&big);
  big.pp = 8;
  big.n_micro_batches = 1000000;
  double t = 0;
  assert_int_equal(sim_n_passes(&big), 16000000);
  assert_int_equal(sim_pipeline(ctx, &big, &r, SIM_MAX_PASSES_DEFAULT, NULL, NULL, &t), AP_UNSUPPORTED);
  assert_non_null(strstr(ap_ctx_error(ctx), "16000000 passes"));
  assert_non_null(strstr(ap_ctx_error(ctx), "--max-events"));
  assert_null(strchr(ap_ctx_error(ctx), '\n'));
  ap_ctx_free(ctx);
}

/* Every plan that estimate accepts simulates: the planner's top plans on several models and clusters, each
 * under every schedule kind the plan admits (vpp 2 for the interleaved and ZB-V ones). */
static void test_planner_plans_simulate(void **state) {
  (void)state;
  static const struct {
    const char *model, *cluster;
    int64_t gbs, seq;
  } cases[] = {
      {"gpt2", "dgx-h100:2x1", 16, 1024},         {"llama-3-8b", "h100:16", 64, 4096},
      {"mixtral-8x7b", "h100:16", 128, 4096},     {"llama-3-70b", "dgx-h100:8x8", 256, 4096},
      {"qwen3-30b-a3b", "dgx-h100:4x8", 128, 4096}, {"data/models/examples/resnet-tiny.json", "dgx-h100:2x1", 16, 0},
  };
  static const plan_schedule kinds[] = {PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B, PLAN_SCHED_ZB_H1,
                                        PLAN_SCHED_ZB_V};
  int n_simulated = 0;
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    env_fixture f;
    env_open(&f, cases[i].model, cases[i].cluster);
    search_opts o = search_opts_defaults();
    o.global_batch_size = cases[i].gbs;
    o.seq_length = cases[i].seq;
    o.top_k = 5;
    o.time_budget_s = 0.5;
    search_result *res = NULL;
    int n = 0;
    ap_status st = search_run_all(f.ctx, f.env, &o, &res, &n, NULL);
    if (st && st != AP_INFEASIBLE) fail_msg("%s on %s: %s", cases[i].model, cases[i].cluster, ap_ctx_error(f.ctx));
    static cost_result r;
    for (int j = 0; j < n; j++)
      for (size_t k = 0; k <= AP_COUNT(kinds); k++) {
        plan p = res[j].p; /* the planner's own plan first (k = 0), then under each kind */
        if (k > 0) {
          p.schedule = kinds[k - 1];
          p.vpp = p.schedule == PLAN_SCHED_INTERLEAVED_1F1B || p.schedule == PLAN_SCHED_ZB_V ? 2 : 1;
          p.n_stage_layers = 0;
          p.n_chunk_recompute = 0;
        }
        if (cost_estimate(f.ctx, f.env, &p, &r)) continue; /* not a plan estimate accepts */
        double t = NAN;
        if (sim_pipeline(f.ctx, &p, &r, 0, NULL, NULL, &t))
          fail_msg("%s on %s, pp %lld vpp %lld m %lld %s: %s", cases[i].model, cases[i].cluster, (long long)p.pp,
                   (long long)p.vpp, (long long)p.n_micro_batches, plan_schedule_name(p.schedule), ap_ctx_error(f.ctx));
        assert_true(isfinite(t) && t > 0);
        n_simulated++;
      }
    free(res);
    env_close(&f);
  }
  assert_true(n_simulated >= 20);
}

/* The schedule's lists (plan/schedule.h) are what the schedule says: every stage runs each pass of each of its
 * chunks and micro-batches exactly once, F before B before W, never more chunk passes in flight than the rule,
 * and 1F1B warms up with Megatron's pp − r − 1 forwards plus one before its first backward. */
static void test_schedule_orders(void **state) {
  (void)state;
  static const plan_schedule kinds[] = {PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B, PLAN_SCHED_ZB_H1,
                                        PLAN_SCHED_ZB_V};
  ap_ctx *ctx = ap_ctx_new();
  for (size_t k = 0; k < AP_COUNT(kinds); k++)
    for (int64_t pp = 1; pp <= 8; pp *= 2)
      for (int64_t m = 1; m <= 12; m++) {
        plan p;
        plan_defaults(&p);
        p.pp = pp;
        p.schedule = kinds[k];
        p.vpp = kinds[k] == PLAN_SCHED_INTERLEAVED_1F1B || kinds[k] == PLAN_SCHED_ZB_V ? 2 : 1;
        p.n_micro_batches = m;
        if (p.schedule == PLAN_SCHED_INTERLEAVED_1F1B && m % pp != 0) continue;
        bool zb = p.schedule == PLAN_SCHED_ZB_H1 || p.schedule == PLAN_SCHED_ZB_V;
        plan_schedule_order o;
        assert_int_equal(plan_schedule_build(ctx, &p, &o), AP_OK);
        int64_t n_chunks = pp * p.vpp;
        for (int64_t r = 0; r < pp; r++) {
          static int seen[PLAN_MAX_CHUNKS][16][3];
          memset(seen, 0, sizeof seen);
          int64_t in_flight = 0, n_f_before_b = -1, n_f = 0;
          for (size_t i = o.first[r]; i < o.first[r + 1]; i++) {
            const sched_item *it = &o.items[i];
            assert_true(it->chunk >= 0 && it->chunk < n_chunks && plan_chunk_rank(&p, it->chunk) == r);
            assert_true(it->micro_batch >= 0 && it->micro_batch < m);
            assert_int_equal(seen[it->chunk][it->micro_batch][it->pass]++, 0);
            if (it->pass == SCHED_B) assert_int_equal(seen[it->chunk][it->micro_batch][SCHED_F], 1);
            if (it->pass == SCHED_W) assert_int_equal(seen[it->chunk][it->micro_batch][SCHED_B], 1);
            if (it->pass == SCHED_F) in_flight++, n_f++;
            if (it->pass == SCHED_B) {
              if (n_f_before_b < 0) n_f_before_b = n_f;
              in_flight--;
            }
            assert_true(in_flight <= plan_schedule_in_flight_passes(&p, r));
            assert_true(zb || it->pass != SCHED_W);
          }
          assert_int_equal(o.first[r + 1] - o.first[r], (size_t)(p.vpp * m * (zb ? 3 : 2)));
          if (p.schedule == PLAN_SCHED_1F1B) assert_int_equal(n_f_before_b, pp - r < m ? pp - r : m);
          if (p.schedule == PLAN_SCHED_GPIPE) assert_int_equal(n_f_before_b, m);
        }
        plan_schedule_free(&o);
      }
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_korthikanti_table2),
      cmocka_unit_test(test_op_checkpointing),
      cmocka_unit_test(test_p2p_overlap_by_schedule),
      cmocka_unit_test(test_host_issue_bound),
      cmocka_unit_test(test_loss_memory),
      cmocka_unit_test(test_unfused_attention),
      cmocka_unit_test(test_fa2_on_hopper),
      cmocka_unit_test(test_fp8_casts),
      cmocka_unit_test(test_grouped_gemm_fixed_per_expert),
      cmocka_unit_test(test_unaligned_heads),
      cmocka_unit_test(test_zero_model_states),
      cmocka_unit_test(test_stack_model_states),
      cmocka_unit_test(test_closed_form_equals_simulation),
      cmocka_unit_test(test_simulator_uneven),
      cmocka_unit_test(test_trace_event_schema),
      cmocka_unit_test(test_pipeline_send_from_tensors),
      cmocka_unit_test(test_env_parsed_once_per_context),
      cmocka_unit_test(test_schedule_orders),
      cmocka_unit_test(test_every_schedule_completes),
      cmocka_unit_test(test_planner_plans_simulate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
