/* Facts about a model graph that a plan's constraints need (plan layer): the layer count that pipeline
 * stages split, the attention heads and KV heads that tensor parallelism splits, the experts that expert
 * parallelism splits. They are read from the graph itself, not from a config, so that a JSON op graph is
 * checked by the same rules as a transformer built from a Hugging Face config. */
#include "plan/plan.h"

void plan_model_facts_of(const graph *g, plan_model_facts *out) {
  plan_model_facts f = {0};
  int64_t all_blocks = 0;
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    all_blocks += blk->repeat;
    if (blk->role == BLOCK_LAYER) {
      f.has_layers = true;
      f.n_layers += blk->repeat;
    }
    for (int j = 0; j < blk->n_ops; j++) {
      const graph_op *op = &blk->ops[j];
      if (op->tp_split) f.has_tp_ops = true;
      if (op->kind == OP_ATTENTION) {
        f.n_attention_ops++;
        f.heads = ap_gcd_i64(f.heads, op->heads);
        f.kv_heads = ap_gcd_i64(f.kv_heads, op->kv_heads > 0 ? op->kv_heads : op->heads);
      }
      /* Routed experts are the matmuls with several weight copies (graph.h); the router and the dispatch
       * carry no expert weights of their own. */
      if (op->kind == OP_MATMUL && op->n_experts > 1) f.n_experts = ap_gcd_i64(f.n_experts, op->n_experts);
    }
    for (int t = 0; t < blk->n_tensors && !f.uses_seq; t++)
      for (int d = 0; d < blk->tensors[t].n_dims; d++)
        if (blk->tensors[t].dims[d] == DIM_S) f.uses_seq = true;
  }
  /* Without layer blocks the pipeline splits whatever blocks there are (DESIGN.md: pp over blocks). */
  if (!f.has_layers) f.n_layers = all_blocks;
  f.default_seq = g->default_seq;
  *out = f;
}
