/* FLOP conventions and utilisation (cost layer): the three FLOP counts of one iteration that `estimate`
 * reports and the MFU of each against the cluster's dense bf16 peak (DESIGN.md; COSTMODEL.md §1.3-1.5).
 * estimate.c calls it once per plan with the hardware FLOP that the ranks (rank.c) accumulated. */
#include <string.h>

#include "cost/internal.h"

/* The dense bf16 peak per device: the device-weighted mean over node groups of different devices. */
static double mean_peak(const hw_cluster *hc) {
  double peak = hc->groups[0].device.peak_flop_per_s[HW_DTYPE_BF16];
  for (int gi = 1; gi < hc->n_groups; gi++)
    if (hc->groups[gi].device.peak_flop_per_s[HW_DTYPE_BF16] != peak) {
      double sum = 0;
      for (int k = 0; k < hc->n_groups; k++)
        sum += hc->groups[k].device.peak_flop_per_s[HW_DTYPE_BF16] * (double)hc->groups[k].n_devices;
      return sum / (double)hc->n_devices;
    }
  return peak;
}

/* The per-token FLOP of the three conventions and the mean peak, at sequence length s. */
static flop_memo per_token(const cost_env *env, double s) {
  const graph *g = env->g;
  double gemm_tok = graph_train_flop_per_seq(g, s, true) / s;
  bool tied_table = false;
  for (int j = 0; j < g->n_blocks; j++)
    for (int q = 0; q < g->blocks[j].n_ops; q++) tied_table |= g->blocks[j].ops[q].tied;
  double quad_tok = 0, embed_params = 0, attn_tok = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    op_cost c = graph_block_eval(&g->blocks[bi], 1, s);
    quad_tok += 3.0 * c.attn_quadratic_flop / s * (double)g->blocks[bi].repeat;
    for (int k = 0; k < g->blocks[bi].n_ops; k++) {
      const graph_op *op = &g->blocks[bi].ops[k];
      /* An embedding table is no matmul parameter, unless it is the table the tied LM head multiplies by. */
      if (op->kind == OP_EMBEDDING && !(tied_table && strcmp(op->name, "token_embedding") == 0))
        embed_params += (double)graph_op_params(op);
    }
  }
  for (int bi = 0; bi < g->n_blocks; bi++)
    for (int k = 0; k < g->blocks[bi].n_ops; k++)
      if (g->blocks[bi].ops[k].kind == OP_ATTENTION) {
        op_cost c = graph_op_eval(&g->blocks[bi], &g->blocks[bi].ops[k], 1, s);
        attn_tok += 3.0 * c.fwd_gemm_flop / s * (double)g->blocks[bi].repeat;
      }
  flop_memo f = {.set = true, .s = s};
  /* PaLM Appendix B: 6·N (matmul parameters, active for MoE) + the attention term, no causal discount. */
  f.palm_tok = 6.0 * ((double)graph_params_active(g) - embed_params) + attn_tok;
  /* Megatron's num_floating_point_operations: GEMMs only, attention halved for causality. */
  f.megatron_tok = gemm_tok - 0.5 * quad_tok;
  f.graph_tok = graph_train_flop_per_seq(g, s, false) / s;
  f.peak = mean_peak(env->hc);
  return f;
}

void cost_flop_conventions(const cost_env *env, const plan *p, double s, double flop_hardware, cost_result *out) {
  const graph *g = env->g;
  flop_memo f;
  if (env->flops && env->flops->set && env->flops->s == s) f = *env->flops;
  else {
    f = per_token(env, s);
    if (env->flops) *env->flops = f;
  }
  out->flop_palm = f.palm_tok * out->tokens_per_iter;
  out->flop_megatron = f.megatron_tok * out->tokens_per_iter;
  out->flop_hardware = flop_hardware;
  double n_dev = (double)plan_n_devices(p), peak = f.peak;
  out->mfu_palm = out->flop_palm / (out->iter_s * n_dev * peak);
  out->mfu_megatron = out->flop_megatron / (out->iter_s * n_dev * peak);
  out->hfu = out->flop_hardware / (out->iter_s * n_dev * peak);
  out->tflops_per_device_palm = out->flop_palm / (out->iter_s * n_dev) / 1e12;
  out->tflops_per_device_megatron = out->flop_megatron / (out->iter_s * n_dev) / 1e12;
  out->flop_graph = f.graph_tok * out->tokens_per_iter;
  out->mfu_graph = out->flop_graph / (out->iter_s * n_dev * peak);
  out->headline_graph = g->model_type && (strcmp(g->model_type, "onnx") == 0 || strcmp(g->model_type, "graph") == 0);
}
