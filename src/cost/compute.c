/* The compute part of the cost model (cost layer); see compute.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/compute.h"
#include "cost/internal.h"

ap_status compute_profile_parse(ap_ctx *ctx, arena *a, const char *file, const char *text, size_t n,
                                compute_model *cm) {
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, file, text, n, &root);
  if (st) return st;
  jx_src src = {ctx, file, ""};
  const char *fmt = NULL;
  if ((st = jx_str(&src, root, "format", true, &fmt, NULL))) goto out;
  if (strcmp(fmt, "autopar-profile/1") != 0) {
    st = jx_fail(&src, "format", "expected \"autopar-profile/1\", got \"%s\"", fmt);
    goto out;
  }
  json_t *gemm = json_object_get(root, "gemm");
  if (!json_is_array(gemm)) {
    st = jx_fail(&src, "gemm", "expected an array of measured GEMMs");
    goto out;
  }
  size_t count[HW_DTYPE_COUNT] = {0};
  size_t i;
  json_t *e;
  /* Two passes: count per dtype, then fill. */
  for (int pass = 0; pass < 2; pass++) {
    json_array_foreach(gemm, i, e) {
      char where[64];
      snprintf(where, sizeof where, "gemm[%zu]", i);
      jx_src es = {ctx, file, where};
      const char *dts = NULL;
      int64_t m = 0, nn = 0, k = 0;
      double eff = 0;
      if ((st = jx_str(&es, e, "dtype", true, &dts, NULL)) || (st = jx_i64(&es, e, "m", true, 1, INT64_MAX, &m, NULL)) ||
          (st = jx_i64(&es, e, "n", true, 1, INT64_MAX, &nn, NULL)) ||
          (st = jx_i64(&es, e, "k", true, 1, INT64_MAX, &k, NULL)) ||
          (st = jx_f64(&es, e, "efficiency", true, 1e-6, 1.0, &eff, NULL)))
        goto out;
      hw_dtype dt;
      if (!hw_dtype_from_name(dts, &dt)) {
        st = jx_fail(&es, "dtype", "unknown dtype \"%s\"", dts);
        goto out;
      }
      if (pass == 0) {
        count[dt]++;
      } else {
        cm->points[dt][cm->n_points[dt]++] =
            (compute_gemm_point){log((double)m), log((double)nn), log((double)k), eff};
      }
    }
    if (pass == 0)
      for (int d = 0; d < HW_DTYPE_COUNT; d++) {
        cm->n_points[d] = 0;
        cm->points[d] = count[d] ? arena_alloc(a, sizeof(compute_gemm_point) * count[d]) : NULL;
        if (count[d] && !cm->points[d]) {
          st = ctx_fail(ctx, AP_NOMEM, "out of memory");
          goto out;
        }
      }
  }
  const char *source = "";
  if ((st = jx_str(&src, root, "source", false, &source, NULL))) goto out;
  if (json_object_get(root, "executor")) { /* the reference executor's kernels (exec_cpu.c) */
    exec_cpu_profile *x = arena_alloc(a, sizeof *x);
    if (!x) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      goto out;
    }
    if ((st = exec_cpu_profile_parse(ctx, file, root, x))) goto out;
    cm->exec = x;
  }
  cm->profile_source = arena_strdup(a, source);
out:
  json_decref(root);
  return st;
}

/* A device's parsed profile, kept in the context's memo (ctx_memo_get) so that it is parsed once per context
 * and not once per environment: its GEMM tables live in its own arena. */
typedef struct {
  arena *a;
  compute_model cm;
} parsed_profile;

static void parsed_profile_free(void *v) {
  parsed_profile *pp = v;
  if (pp) arena_free(pp->a);
  free(pp);
}

/* Copies the profile part of `from` (tables and source) into out, from arena a. */
static ap_status copy_profile(ap_ctx *ctx, arena *a, const compute_model *from, compute_model *out) {
  for (int d = 0; d < HW_DTYPE_COUNT; d++) {
    size_t n = (size_t)from->n_points[d];
    out->n_points[d] = from->n_points[d];
    out->points[d] = n ? arena_alloc(a, sizeof(compute_gemm_point) * n) : NULL;
    if (n && !out->points[d]) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    if (n) memcpy(out->points[d], from->points[d], sizeof(compute_gemm_point) * n);
  }
  out->profile_source = arena_strdup(a, from->profile_source);
  if (from->exec) {
    exec_cpu_profile *x = arena_alloc(a, sizeof *x);
    if (!x) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    *x = *from->exec;
    out->exec = x;
  }
  return out->profile_source ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

ap_status compute_model_init(ap_ctx *ctx, arena *a, const hw_device *dev, const compute_tuning *t, compute_model *out) {
  memset(out, 0, sizeof *out);
  out->device = *dev;
  out->tuning = t ? *t : compute_tuning_defaults();
  out->profile_source = "";
  char path[128], key[160];
  snprintf(path, sizeof path, "data/profiles/%s.json", dev->name);
  snprintf(key, sizeof key, "cost.profile:%s", dev->profile_key[0] ? dev->profile_key : path);
  const parsed_profile *cached = ctx_memo_get(ctx, key);
  if (cached) return copy_profile(ctx, a, &cached->cm, out);
  /* An inline profile (hw/device.c keeps its text in the memo) comes before the embedded file of the name. */
  embedded_file inline_file;
  const embedded_file *f = NULL;
  if (dev->profile_key[0]) {
    char text_key[160];
    snprintf(text_key, sizeof text_key, "hw.profile:%s", dev->profile_key);
    const char *text = ctx_memo_get(ctx, text_key);
    if (!text) return ctx_fail(ctx, AP_INTERNAL, "device %s: its inline profile is not in this context", dev->name);
    inline_file = (embedded_file){.path = "device.profile", .text = text, .n_bytes = strlen(text)};
    f = &inline_file;
  } else {
    f = embedded_find(path);
  }
  if (!f) return AP_OK;
  parsed_profile *pp = calloc(1, sizeof *pp);
  if (!pp || !(pp->a = arena_new())) {
    free(pp);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  ap_status st = compute_profile_parse(ctx, pp->a, f->path, f->text, f->n_bytes, &pp->cm);
  if (!st) st = copy_profile(ctx, a, &pp->cm, out);
  if (st || !ctx_memo_put(ctx, key, pp, parsed_profile_free)) parsed_profile_free(pp);
  return st;
}

/* The shape curve: each dimension d scales efficiency by d/(d + d_half). */
static double shape_factor(double d, double d_half) { return d / (d + d_half); }

double compute_gemm_eff(const compute_model *cm, hw_dtype dt, double m, double n, double k) {
  const compute_tuning *t = &cm->tuning;
  double curve = t->gemm_eff_max * shape_factor(m, t->gemm_dim_half) * shape_factor(n, t->gemm_dim_half) *
                 shape_factor(k, t->gemm_dim_half) /
                 (shape_factor(8192, t->gemm_dim_half) * shape_factor(8192, t->gemm_dim_half) *
                  shape_factor(8192, t->gemm_dim_half));
  if (curve > t->gemm_eff_max) curve = t->gemm_eff_max;
  hw_dtype table = cm->n_points[dt] ? dt : HW_DTYPE_BF16;
  int np = cm->n_points[table];
  /* Without a measured fp8 table, fp8 runs at fp8_gemm_speedup times the bf16 rate, i.e. that fraction of the
   * (twice as high) fp8 peak. */
  double fp8_scale = (dt == HW_DTYPE_FP8 && table != HW_DTYPE_FP8) ? t->fp8_gemm_speedup / 2.0 : 1.0;
  if (np == 0) return curve * fp8_scale;
  /* Inverse-distance weighting of the 4 nearest measured shapes in (log m, log n, log k), then the shape curve's
   * ratio between the query and that neighbourhood carries the estimate to shapes outside the table. */
  double lm = log(m), ln = log(n), lk = log(k);
  double best_d[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
  int best_i[4] = {-1, -1, -1, -1};
  for (int i = 0; i < np; i++) {
    const compute_gemm_point *p = &cm->points[table][i];
    double d = (p->log_m - lm) * (p->log_m - lm) + (p->log_n - ln) * (p->log_n - ln) + (p->log_k - lk) * (p->log_k - lk);
    for (int j = 0; j < 4; j++)
      if (d < best_d[j]) {
        for (int q = 3; q > j; q--) {
          best_d[q] = best_d[q - 1];
          best_i[q] = best_i[q - 1];
        }
        best_d[j] = d;
        best_i[j] = i;
        break;
      }
  }
  double wsum = 0, eff = 0, curve_nb = 0;
  for (int j = 0; j < 4 && best_i[j] >= 0; j++) {
    const compute_gemm_point *p = &cm->points[table][best_i[j]];
    double w = 1.0 / (best_d[j] + 1e-3);
    wsum += w;
    eff += w * p->eff;
    curve_nb += w * shape_factor(exp(p->log_m), t->gemm_dim_half) * shape_factor(exp(p->log_n), t->gemm_dim_half) *
                shape_factor(exp(p->log_k), t->gemm_dim_half);
  }
  eff /= wsum;
  curve_nb /= wsum;
  double here = shape_factor(m, t->gemm_dim_half) * shape_factor(n, t->gemm_dim_half) * shape_factor(k, t->gemm_dim_half);
  eff *= here / curve_nb;
  /* The profile's level is that of a well-tuned library call; the framework's level is the fitted maximum. */
  eff *= t->gemm_eff_max / 0.75;
  eff *= fp8_scale;
  return eff > 1.0 ? 1.0 : eff;
}

double compute_op_divisor(const graph_block *blk, const graph_op *op, const compute_shard *sh) {
  const graph_tensor *out = &blk->tensors[op->out];
  bool tp_split = op->tp_split || out->tp_dim >= 0 || (sh->sequence_parallel && out->seq_parallel);
  return (double)sh->cp * (tp_split ? (double)sh->tp : 1.0);
}

/* The rate of vector (non-tensor-core) arithmetic: the fp32 peak, or a tenth of the bf16 tensor peak for a
 * device file that states none (the CUDA-core to tensor-core ratio of A100/H100 is 1:16 to 1:15). */
static double vector_peak(const hw_device *d) {
  double fp32 = d->peak_flop_per_s[HW_DTYPE_FP32];
  return fp32 > 0 ? fp32 : d->peak_flop_per_s[HW_DTYPE_BF16] / 10.0;
}

/* Memory-bound time of moving bytes. */
static double mem_time_s(const compute_model *cm, double bytes) {
  return bytes / (cm->device.mem_bw_Bps * cm->tuning.mem_eff);
}

compute_op_time compute_op(const compute_model *cm, const graph_block *blk, const graph_op *op, double b, double s,
                           const compute_shard *sh) {
  compute_op_time r = {0};
  op_cost c = graph_op_eval(blk, op, b, s);
  double div = compute_op_divisor(blk, op, sh);
  double fwd_gemm = c.fwd_gemm_flop / div, bwd_gemm = c.bwd_gemm_flop / div;
  double fwd_vec = c.fwd_vector_flop / div;
  double bwd_vec = (c.dgrad_flop + c.wgrad_flop - c.bwd_gemm_flop) / div;
  r.fwd_flop = fwd_gemm + fwd_vec;
  r.bwd_flop = bwd_gemm + bwd_vec;
  r.fwd_bytes = (c.read_bytes + c.write_bytes) / div;
  r.bwd_bytes = 2 * r.fwd_bytes;
  double mem_fwd = mem_time_s(cm, r.fwd_bytes), mem_bwd = mem_time_s(cm, r.bwd_bytes);
  const hw_device *d = &cm->device;
  if (op->kind == OP_MATMUL || op->kind == OP_ROUTER || op->kind == OP_CONV2D) {
    /* The per-device GEMM shape: rows over cp (and, for routed experts, spread over the local experts);
     * columns or the reduction dimension over tp. */
    const graph_tensor *x = &blk->tensors[op->in[0]];
    double rows = graph_tensor_numel(x, b, s) / (double)op->weight_k / (double)sh->cp;
    double n = (double)op->weight_n, k = (double)op->weight_k;
    if (op->kind == OP_CONV2D) rows = graph_tensor_numel(&blk->tensors[op->out], b, s) / n / (double)sh->cp;
    double tpd = div / (double)sh->cp;
    if (op->n_experts > 1) {
      int64_t etp = sh->etp > 0 ? sh->etp : sh->tp;
      rows = rows * (double)(sh->ep > 0 ? sh->ep : 1) / (double)op->n_experts;
      n /= (double)etp;
    } else if (tpd > 1) {
      if (blk->tensors[op->out].tp_dim >= 0) n /= tpd;
      else k /= tpd;
    }
    if (rows < 1) rows = 1;
    hw_dtype dt = op->kind == OP_ROUTER ? HW_DTYPE_BF16 : sh->gemm_dtype;
    double peak = d->peak_flop_per_s[dt] > 0 ? d->peak_flop_per_s[dt] : d->peak_flop_per_s[HW_DTYPE_BF16];
    double eff_fwd = compute_gemm_eff(cm, dt, rows, n, k);
    double moe = op->n_experts > 1 ? cm->tuning.moe_gemm_factor : 1.0;
    /* dgrad is rows×k by k… the transposed shapes; wgrad reduces over rows. Each is costed on its own shape. */
    double eff_dgrad = compute_gemm_eff(cm, dt, rows, k, n), eff_wgrad = compute_gemm_eff(cm, dt, k, n, rows);
    /* Each GEMM kernel also holds the device for gemm_fixed_s besides its FLOPs (tuning.c): once forward and
     * twice backward (input and weight gradients), and for routed experts once per local expert, since the
     * grouped GEMM runs one GEMM per expert (TransformerEngine multi_stream_cublas_gemm). */
    double kernels = op->n_experts > 1 ? (double)op->n_experts / (double)(sh->ep > 0 ? sh->ep : 1) : 1.0;
    double fixed = fwd_gemm > 0 ? kernels * cm->tuning.gemm_fixed_s : 0.0;
    double t_fwd = fwd_gemm / (peak * eff_fwd * moe) + fixed;
    double t_bwd = 0.5 * bwd_gemm / (peak * eff_dgrad * moe) + 0.5 * bwd_gemm / (peak * eff_wgrad * moe) + 2.0 * fixed;
    r.fwd_s = fmax(t_fwd, mem_fwd) + fwd_vec / vector_peak(d);
    r.bwd_s = fmax(t_bwd, mem_bwd) + bwd_vec / vector_peak(d);
    if (dt == HW_DTYPE_FP8) {
      /* fp8 training quantises each GEMM's 16-bit input before the forward GEMM and the output gradient before
       * the backward ones, each into a row-wise and a transposed (column-wise) fp8 copy, since fp8 tensor cores
       * take only the TN layout on Hopper: read 2 bytes, write 1 + 1 per element, in separate memory-bound
       * kernels (Micikevicius et al. 2022, "FP8 formats for deep learning", §4; NVIDIA Transformer Engine
       * docs, "FP8 primer", casts and transposes; torchao float8 dynamic scaling). Weights are cast once a
       * step and cached over micro-batches (Transformer Engine is_first_microbatch), so they are not counted.
       * The cost per FLOP falls as 1/k and 1/n: it matters for small hidden sizes. */
      r.fwd_s += mem_time_s(cm, rows * k * kernels * 4.0);
      r.bwd_s += mem_time_s(cm, rows * n * kernels * 4.0);
    }
  } else if (op->kind == OP_ATTENTION) {
    double peak = d->peak_flop_per_s[HW_DTYPE_BF16];
    if (op->head_dim_qk % 8 != 0 || op->head_dim_v % 8 != 0) {
      /* A head dimension that is not a multiple of 8 elements (16 bytes in 16-bit) keeps the attention's
       * matmuls off the tensor cores: cuBLAS needs that alignment for them (NVIDIA Deep Learning Performance
       * Guide, "Matrix multiplication background", tensor core requirements) and FlashAttention-2 accepts only
       * such head dimensions (Dao 2023, README requirements), so they run on the vector units. BigScience found
       * its 176B shape by avoiding such effects (BigScience blog, "What language model to train if you have
       * two million GPU hours", 2022). */
      r.fwd_s = fmax(fwd_gemm / vector_peak(d), mem_fwd);
      r.bwd_s = fmax(bwd_gemm / vector_peak(d), mem_bwd);
    } else if (sh->attn_scores) {
      /* Unfused attention (plan/stack.h attn_scores; Megatron-DeepSpeed's baddbmm, fused scale-mask-softmax,
       * bmm): Q Kᵀ and P V are batched GEMMs over the full sq×sk product, at the GEMM efficiency of their
       * shapes (rows sq, columns sk, reduction d_qk; then sq, d_v, sk), and the 16-bit scores pass through
       * device memory between kernels: forward, written by Q Kᵀ, read and written by the softmax, read by P V
       * (4 passes of 2 bytes); backward, dP written, P read for dV, P and dP read and dS written by the softmax
       * backward, dS read for dQ and for dK (7 passes). A dropout on the probabilities (p > 0) would add more;
       * it is not counted. The scores of one device: heads/tp, queries/cp (Korthikanti et al. 2022 §4.1,
       * the 5as²b bytes of the attention's softmax, dropout and mask). */
      const graph_tensor *q = &blk->tensors[op->in[0]];
      double rows_q = graph_tensor_numel(q, b, s) / ((double)op->heads * (double)op->head_dim_qk);
      double keys = op->window > 0 && (double)op->window < s ? (double)op->window : s;
      double scores = c.fwd_vector_flop / 4.0 / div; /* tokens·keys·heads, per device */
      hw_dtype dt = sh->gemm_dtype == HW_DTYPE_FP8 ? HW_DTYPE_BF16 : sh->gemm_dtype;
      double pk = d->peak_flop_per_s[dt] > 0 ? d->peak_flop_per_s[dt] : peak;
      double eff = 0.5 * (compute_gemm_eff(cm, dt, rows_q, keys, (double)op->head_dim_qk) +
                          compute_gemm_eff(cm, dt, rows_q, (double)op->head_dim_v, keys));
      r.fwd_s = fwd_gemm / (pk * eff) + mem_time_s(cm, 4.0 * 2.0 * scores) + fwd_vec / vector_peak(d);
      r.bwd_s = bwd_gemm / (pk * eff) + mem_time_s(cm, 7.0 * 2.0 * scores) + bwd_vec / vector_peak(d);
      r.fwd_bytes += 4.0 * 2.0 * scores;
      r.bwd_bytes += 7.0 * 2.0 * scores;
    } else {
      /* attn_fwd_eff is the chip's native fused attention. FlashAttention-2 (plan/stack.h attn_sm80) keeps to
       * Ampere's mma.sync; on Hopper and Blackwell, whose full tensor rate needs warp-group (wgmma) or tcgen05
       * instructions, it reaches 35% of peak where the native kernels reach 75% (Shah et al. 2024,
       * FlashAttention-3, §1). */
      double fa2 = sh->attn_sm80 && (strcmp(d->family, "Hopper") == 0 || strcmp(d->family, "Blackwell") == 0)
                       ? 0.35 / 0.75
                       : 1.0;
      r.fwd_s = fmax(fwd_gemm / (peak * cm->tuning.attn_fwd_eff * fa2), mem_fwd);
      r.bwd_s = fmax(bwd_gemm / (peak * cm->tuning.attn_bwd_eff * fa2), mem_bwd);
    }
  } else {
    if (op->kind == OP_LOSS && op->n_in > 0 && (sh->loss_fwd_bytes > 0 || sh->loss_bwd_bytes > 0)) {
      /* The loss's kernels as its stack runs them (plan/stack.h plan_stack_loss; stack.c [MLM-ce] [MLM-fce]
       * [ATen-ce]): bytes per logit element of this device, whose vocabulary is its tensor-parallel shard
       * (cost_tensor_divisor), forward and backward; a side left at 0 keeps the op's own figure. */
      const graph_tensor *in = &blk->tensors[op->in[0]];
      double elems = graph_tensor_numel(in, b, s) / cost_tensor_divisor(in, sh);
      if (sh->loss_fwd_bytes > 0) r.fwd_bytes = elems * sh->loss_fwd_bytes;
      if (sh->loss_bwd_bytes > 0) r.bwd_bytes = elems * sh->loss_bwd_bytes;
      mem_fwd = mem_time_s(cm, r.fwd_bytes);
      mem_bwd = mem_time_s(cm, r.bwd_bytes);
    }
    /* Norms, activations, embedding lookups, permutations, the loss: memory-bound kernels. */
    r.fwd_s = fmax(mem_fwd, fwd_vec / vector_peak(d));
    r.bwd_s = fmax(mem_bwd, bwd_vec / vector_peak(d));
  }
  return r;
}
