/* The per-op spec fields of an autopar-plan/2 document (report layer; graph_plan_io.h): the weight specs in the
 * order the model file stores each weight (docs/graph-plan.md "Output") and the specs each activation input
 * needs. search/graph_plan_read.c reads the same fields back and matches them against the op's strategies. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "report/graph_plan_io.h"

static void spec_list(strbuf *sb, const shard_spec *s) {
  sb_puts(sb, "[");
  for (int i = 0; i < s->n_dims; i++) sb_printf(sb, "%s\"%s\"", i ? ", " : "", shard_dim_name(s->dim[i]));
  sb_puts(sb, "]");
}

void gpr_weight_json(strbuf *sb, const graph_op *op, const shard_strategy *s) {
  if (s->weight.n_dims == 0 || graph_op_params(op) <= 0) return;
  shard_spec w;
  if (op->n_weights == 0) {
    sb_puts(sb, ", \"weight_spec\": ");
    spec_list(sb, &s->weight);
    return;
  }
  shard_stored_weight_spec(s, &op->weights[0], &w);
  sb_puts(sb, ", \"weight_spec\": ");
  spec_list(sb, &w);
  if (op->n_weights < 2) return;
  sb_puts(sb, ", \"weight_specs\": {");
  for (int k = 0; k < op->n_weights; k++) {
    shard_stored_weight_spec(s, &op->weights[k], &w);
    if (k) sb_puts(sb, ", ");
    jx_sb_str(sb, op->weights[k].name ? op->weights[k].name : "");
    sb_puts(sb, ": ");
    spec_list(sb, &w);
  }
  sb_puts(sb, "}");
}

void gpr_input_json(strbuf *sb, const graph_op *op, const shard_strategy *s) {
  sb_puts(sb, ", \"input_specs\": [");
  for (int i = 0; i < op->n_in && i < OP_MAX_IN; i++) {
    if (i) sb_puts(sb, ", ");
    spec_list(sb, &s->in[i]);
  }
  sb_puts(sb, "]");
}

const char *gpr_cluster_spec(const hw_cluster *c, char *buf, size_t n) {
  /* hw/cluster.c records a preset or shorthand as "SPEC (data/clusters/FILE.json)" and a file as its path. */
  const char *o = c->origin ? c->origin : "";
  const char *paren = strstr(o, " (");
  size_t len = paren && o[strlen(o) - 1] == ')' ? (size_t)(paren - o) : strlen(o);
  if (len == 0) o = c->name ? c->name : "", len = strlen(o);
  snprintf(buf, n, "%.*s", (int)len, o);
  return buf;
}
