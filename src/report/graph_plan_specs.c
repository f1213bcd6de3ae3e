/* The per-op spec fields of an autopar-plan/2 document (report layer; graph_plan_io.h): the weight specs in the
 * order the model file stores each weight (docs/graph-plan.md "Output"), also as the plan's explanations print
 * them, and the specs each activation input needs. search/graph_plan_read.c reads the same fields back and matches them against the op's strategies. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "report/graph_plan_io.h"

void gpr_spec_json(strbuf *sb, const shard_spec *s) {
  sb_puts(sb, "[");
  for (int i = 0; i < s->n_dims; i++) sb_printf(sb, "%s\"%s\"", i ? ", " : "", shard_dim_name(s->dim[i]));
  sb_puts(sb, "]");
}

void gpr_spec_text(strbuf *sb, const shard_spec *s) {
  for (int i = 0; i < s->n_dims; i++) sb_printf(sb, "%s%s", i ? "," : "", shard_dim_name(s->dim[i]));
  if (s->n_dims == 0) sb_puts(sb, "-");
}

/* The weight fields of an op in stored order (see gpr_weight_json), as JSON or as the explanation's text. */
static void weight_fields(strbuf *sb, const graph_op *op, const shard_strategy *s, bool json) {
  if (s->weight.n_dims == 0 || graph_op_params(op) <= 0) return;
  void (*put)(strbuf *, const shard_spec *) = json ? gpr_spec_json : gpr_spec_text;
  shard_spec w = s->weight;
  if (op->n_weights > 0) shard_stored_weight_spec(s, &op->weights[0], &w);
  sb_puts(sb, json ? ", \"weight_spec\": " : " weight ");
  if (op->n_weights < 1 || json) put(sb, &w);
  /* weight_specs for every op with stored weights, one or several, by initializer name (the text names each);
   * weight_spec stays beside it (the first weight's, as older readers take it). */
  if (op->n_weights < 1) return;
  sb_puts(sb, json ? ", \"weight_specs\": {" : "");
  for (int k = 0; k < op->n_weights; k++) {
    shard_stored_weight_spec(s, &op->weights[k], &w);
    const char *name = op->weights[k].name ? op->weights[k].name : "";
    if (json) {
      if (k) sb_puts(sb, ", ");
      jx_sb_str(sb, name);
      sb_puts(sb, ": ");
    } else {
      sb_printf(sb, "%s%s ", k ? ", " : "", name);
    }
    put(sb, &w);
  }
  if (json) sb_puts(sb, "}");
}

void gpr_weight_json(strbuf *sb, const graph_op *op, const shard_strategy *s) { weight_fields(sb, op, s, true); }

void gpr_weight_text(strbuf *sb, const graph_op *op, const shard_strategy *s) { weight_fields(sb, op, s, false); }

void gpr_input_json(strbuf *sb, const graph_op *op, const shard_strategy *s) {
  sb_puts(sb, ", \"input_specs\": [");
  for (int i = 0; i < op->n_in && i < OP_MAX_IN; i++) {
    if (i) sb_puts(sb, ", ");
    gpr_spec_json(sb, &s->in[i]);
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
