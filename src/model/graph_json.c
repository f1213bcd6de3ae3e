/* The op-graph JSON reader (model layer): turns an "autopar-graph/1" file, a model described block by block
 * and op by op, into the same graph type that the transformer builder produces (graph.h), so that an MLP or
 * a CNN is costed by the same cost model as a Llama. docs/graph-format.md is the reference for the format.
 *
 * The reader is strict: every field is checked against its kind's field list (a typo is an error, not a
 * silently ignored key), every tensor reference must name a tensor of the block, ops must come in execution
 * order, and the weight shapes must agree with the tensors they multiply. Every error is one line naming the
 * file and the field path ("net.json: blocks[0].ops[2].in[0]: unknown tensor \"y\""). Everything the graph
 * keeps (names included) is copied into the caller's arena, because the JSON tree is freed after reading.
 *
 * Files: graph_json_internal.h (the reading session, the limits, the kind table's type), graph_json_fields.c
 * (errors, small field readers, tensors), graph_json_kinds.c (each op kind's own fields: the kind table), and
 * this file (an op's common fields, the blocks, the file). Calls go one way: this file -> kinds -> fields.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph_json_internal.h"

/* Parameters of an op in double, mirroring graph_op_params, so that overflow is refused before any int64 sum. */
static double op_params_f(const graph_op *op) {
  double p = (double)op->extra_params;
  if (!op->tied && (op->kind == OP_MATMUL || op->kind == OP_ROUTER || op->kind == OP_CONV2D))
    p += ((double)op->weight_k * (double)op->weight_n + (op->has_bias ? (double)op->weight_n : 0)) *
         (double)op->n_experts;
  return p;
}

/* A tied weight must have an earlier op (in this or an earlier block) whose weight or table it can share:
 * a matmul/router/conv2d weight of k × n, or an embedding table of as many parameters. */
static bool has_tie_target(const graph *g, const graph_op *op) {
  double want = (double)op->weight_k * (double)op->weight_n;
  for (int b = 0; b < g->n_blocks; b++)
    for (int i = 0; i < g->blocks[b].n_ops; i++) {
      const graph_op *o = &g->blocks[b].ops[i];
      if (o->kind == OP_EMBEDDING && (double)o->extra_params == want) return true;
      if ((o->kind == OP_MATMUL || o->kind == OP_ROUTER || o->kind == OP_CONV2D) && !o->tied &&
          (double)o->weight_k * (double)o->weight_n == want)
        return true;
    }
  return false;
}

/* Reads "in": an array of min..max tensor names, each produced earlier in the block or by no op at all. */
static ap_status read_inputs(rd *r, const char *where, json_t *jo, const kind_spec *spec, graph_op *op, int oi) {
  json_t *in = json_object_get(jo, "in");
  if (!in || json_is_null(in)) {
    if (spec->min_in == 0) return AP_OK;
    return gj_failf(r, AP_INVALID, where, "in", "required field missing");
  }
  size_t n = json_is_array(in) ? json_array_size(in) : 0;
  if (!json_is_array(in) || n < (size_t)spec->min_in || n > (size_t)spec->max_in) {
    if (spec->min_in == spec->max_in)
      return gj_failf(r, AP_INVALID, where, "in", "expected an array of %d tensor name%s for a %s op", spec->min_in,
                   spec->min_in == 1 ? "" : "s", op_kind_name(op->kind));
    return gj_failf(r, AP_INVALID, where, "in", "expected an array of %d to %d tensor names for a %s op", spec->min_in,
                 spec->max_in, op_kind_name(op->kind));
  }
  for (size_t i = 0; i < n; i++) {
    char key[32];
    snprintf(key, sizeof key, "in[%zu]", i);
    int t;
    ap_status st = gj_resolve(r, where, key, json_array_get(in, i), &t);
    if (st) return st;
    if (r->producer[t] < 0 && r->first_reader[t] < 0) r->first_reader[t] = oi;
    op->in[op->n_in++] = t;
  }
  return AP_OK;
}

/* One output tensor of op: checks it against the op's inputs and earlier producers and readers. */
static ap_status read_one_output(rd *r, const char *where, const char *key, json_t *v, graph_op *op, int oi, int *out) {
  int t;
  ap_status st = gj_resolve(r, where, key, v, &t);
  if (st) return st;
  const graph_block *blk = r->gb.blk;
  for (int i = 0; i < op->n_in; i++)
    if (op->in[i] == t) return gj_failf(r, AP_INVALID, where, key, "\"%s\" is also an input of this op", blk->tensors[t].name);
  if (r->producer[t] >= 0)
    return gj_failf(r, AP_INVALID, where, key, "tensor \"%s\" is already the output of op \"%s\"", blk->tensors[t].name,
                 r->producer[t] == oi ? "(this op)" : blk->ops[r->producer[t]].name);
  if (r->first_reader[t] >= 0)
    return gj_failf(r, AP_INVALID, where, key,
                 "tensor \"%s\" is read by the earlier op \"%s\" (list ops in execution order)", blk->tensors[t].name,
                 blk->ops[r->first_reader[t]].name);
  r->producer[t] = oi;
  *out = t;
  return AP_OK;
}

/* "out": a tensor name, or an array of 1 to OP_MAX_OUT names for an op with several outputs (the first is
 * the one the op's kind rules read, e.g. a matmul's n). */
static ap_status read_output(rd *r, const char *where, json_t *jo, graph_op *op, int oi) {
  json_t *out = json_object_get(jo, "out");
  if (!out || json_is_null(out)) return gj_failf(r, AP_INVALID, where, "out", "required field missing");
  if (!json_is_array(out)) {
    ap_status st = read_one_output(r, where, "out", out, op, oi, &op->out);
    op->n_out = 1;
    op->outs[0] = op->out;
    return st;
  }
  if (json_array_size(out) < 1 || json_array_size(out) > OP_MAX_OUT)
    return gj_failf(r, AP_INVALID, where, "out", "expected a tensor name or an array of 1 to %d tensor names", OP_MAX_OUT);
  for (size_t i = 0; i < json_array_size(out); i++) {
    char key[32];
    snprintf(key, sizeof key, "out[%zu]", i);
    ap_status st = read_one_output(r, where, key, json_array_get(out, i), op, oi, &op->outs[i]);
    if (st) return st;
    op->n_out = (int)i + 1;
  }
  op->out = op->outs[0];
  return AP_OK;
}

/* Reads "save" (tensors kept for the backward pass) and "mask" (a tensor whose element count gives a
 * 1-byte-per-element mask, as for dropout). */
static ap_status read_saved(rd *r, const char *where, json_t *jo, graph_op *op) {
  json_t *save = json_object_get(jo, "save");
  if (save && !json_is_null(save)) {
    if (!json_is_array(save) || json_array_size(save) > OP_MAX_SAVED)
      return gj_failf(r, AP_INVALID, where, "save", "expected an array of at most %d tensor names", OP_MAX_SAVED);
    for (size_t i = 0; i < json_array_size(save); i++) {
      char key[32];
      snprintf(key, sizeof key, "save[%zu]", i);
      int t;
      ap_status st = gj_resolve(r, where, key, json_array_get(save, i), &t);
      if (st) return st;
      for (int k = 0; k < op->n_saved; k++)
        if (op->saved[k] == t) return gj_failf(r, AP_INVALID, where, key, "\"%s\" is listed twice", r->gb.blk->tensors[t].name);
      op->saved[op->n_saved++] = t;
    }
  }
  json_t *mask = json_object_get(jo, "mask");
  if (mask && !json_is_null(mask)) return gj_resolve(r, where, "mask", mask, &op->mask_of);
  return AP_OK;
}

static ap_status read_op(rd *r, const char *where, json_t *jo, int oi) {
  if (!json_is_object(jo)) return gj_failf(r, AP_INVALID, where, "", "expected an op object");
  jx_src s = {r->ctx, r->file, where};
  const char *kind_name = NULL;
  ap_status st = jx_str(&s, jo, "kind", true, &kind_name, NULL);
  if (st) return st;
  op_kind kind;
  if (!op_kind_parse(kind_name, &kind)) {
    const char *names[OP_KIND_COUNT_];
    for (size_t i = 0; i < OP_KIND_COUNT_; i++) names[i] = op_kind_name((op_kind)i);
    char sugg[300];
    gj_suggestion(kind_name, names, OP_KIND_COUNT_, sugg, sizeof sugg);
    return gj_failf(r, AP_INVALID, where, "kind",
                 "unknown op kind \"%.64s\"%s (known: matmul, attention, norm, elementwise, embedding, router, "
                 "dispatch, combine, loss, conv2d, pool)",
                 kind_name, sugg);
  }
  const kind_spec *spec = &gj_kind_specs[kind];
  char keys[256];
  snprintf(keys, sizeof keys, "%s%s%s", OP_COMMON_KEYS, *spec->keys ? "|" : "", spec->keys);
  if ((st = gj_check_keys(r, where, jo, keys))) return st;
  const char *name = NULL;
  if ((st = gj_read_name(r, where, jo, "name", true, &name))) return st;
  const graph_block *blk = r->gb.blk;
  for (int i = 0; i < blk->n_ops; i++)
    if (strcmp(blk->ops[i].name, name) == 0)
      return gj_failf(r, AP_INVALID, where, "name", "duplicate op name \"%s\" in this block", name);
  graph_op op = graph_op_init(kind, name);
  if ((st = read_inputs(r, where, jo, spec, &op, oi))) return st;
  if ((st = read_output(r, where, jo, &op, oi))) return st;
  if ((st = read_saved(r, where, jo, &op))) return st;
  if ((st = jx_bool(&s, jo, "tp_split", false, &op.tp_split, NULL))) return st;
  if ((st = jx_i64(&s, jo, "params", false, 0, (int64_t)MAX_LITERAL_NUMEL, &op.extra_params, NULL))) return st;
  if ((st = spec->read(r, where, jo, &op))) return st;
  if (op.tied && !has_tie_target(r->g, &op))
    return gj_failf(r, AP_INVALID, where, "tied", "no earlier op has a %lld × %lld weight (or embedding table) to share",
                 (long long)op.weight_k, (long long)op.weight_n);
  double p = op_params_f(&op);
  if (p > MAX_PARAMS) return gj_failf(r, AP_INVALID, where, "", "more than %g parameters", MAX_PARAMS);
  if (graph_op_add(&r->gb, &op) < 0) return gj_oom(r);
  return AP_OK;
}

/* ---- Blocks ---- */

static const char *const role_names[] = {[BLOCK_EMBED] = "embed", [BLOCK_LAYER] = "layer", [BLOCK_HEAD] = "head",
                                         [BLOCK_OTHER] = "other"};
_Static_assert(AP_COUNT(role_names) == BLOCK_OTHER + 1, "role_names and block_role disagree");

static ap_status read_role(const rd *r, const char *where, json_t *jb, block_role *out) {
  const char *name = NULL;
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, jb, "role", false, &name, NULL);
  if (st || !name) return st;
  for (size_t i = 0; i < AP_COUNT(role_names); i++)
    if (strcmp(name, role_names[i]) == 0) {
      *out = (block_role)i;
      return AP_OK;
    }
  char sugg[300];
  gj_suggestion(name, role_names, AP_COUNT(role_names), sugg, sizeof sugg);
  return gj_failf(r, AP_INVALID, where, "role", "unknown role \"%.32s\"%s (known: embed, layer, head, other)", name, sugg);
}

/* "input"/"output": a tensor name, or null for none. Absent: the input is the first tensor that an op reads
 * and none produces, the output is the last op's output. */
static ap_status read_boundary(rd *r, const char *where, json_t *jb, const char *key, int fallback, int *out) {
  json_t *v = json_object_get(jb, key);
  if (!v) {
    *out = fallback;
    return AP_OK;
  }
  if (json_is_null(v)) {
    *out = -1;
    return AP_OK;
  }
  return gj_resolve(r, where, key, v, out);
}

static ap_status read_block(rd *r, json_t *jb, int bi) {
  char where[32];
  snprintf(where, sizeof where, "blocks[%d]", bi);
  if (!json_is_object(jb)) return gj_failf(r, AP_INVALID, where, "", "expected a block object");
  ap_status st = gj_check_keys(r, where, jb, "name|role|repeat|tensors|ops|input|output");
  if (st) return st;
  const char *name = NULL;
  if ((st = gj_read_name(r, where, jb, "name", true, &name))) return st;
  for (int i = 0; i < r->g->n_blocks; i++)
    if (strcmp(r->g->blocks[i].name, name) == 0)
      return gj_failf(r, AP_INVALID, where, "name", "duplicate block name \"%s\"", name);
  block_role role = BLOCK_OTHER;
  if ((st = read_role(r, where, jb, &role))) return st;
  jx_src s = {r->ctx, r->file, where};
  int64_t repeat = 1;
  if ((st = jx_i64(&s, jb, "repeat", false, 1, MAX_REPEAT, &repeat, NULL))) return st;
  json_t *tensors = json_object_get(jb, "tensors"), *ops = json_object_get(jb, "ops");
  if (!tensors || json_is_null(tensors)) return gj_failf(r, AP_INVALID, where, "tensors", "required field missing");
  if (!json_is_array(tensors) || json_array_size(tensors) < 1 || json_array_size(tensors) > MAX_TENSORS)
    return gj_failf(r, AP_INVALID, where, "tensors", "expected an array of 1 to %d tensors", MAX_TENSORS);
  if (!ops || json_is_null(ops)) return gj_failf(r, AP_INVALID, where, "ops", "required field missing");
  if (!json_is_array(ops) || json_array_size(ops) < 1 || json_array_size(ops) > MAX_OPS)
    return gj_failf(r, AP_INVALID, where, "ops", "expected an array of 1 to %d ops", MAX_OPS);

  graph_block *blk = graph_block_begin(&r->gb, r->g, name, role, repeat);
  if (!blk || !blk->name) return gj_oom(r);
  int n_tensors = (int)json_array_size(tensors), n_ops = (int)json_array_size(ops);
  for (int i = 0; i < n_tensors; i++) {
    char tw[96];
    snprintf(tw, sizeof tw, "%s.tensors[%d]", where, i);
    if ((st = gj_read_tensor(r, tw, json_array_get(tensors, (size_t)i)))) return st;
  }
  r->producer = arena_alloc(r->a, sizeof(int) * (size_t)n_tensors);
  r->first_reader = arena_alloc(r->a, sizeof(int) * (size_t)n_tensors);
  if (!r->producer || !r->first_reader) return gj_oom(r);
  for (int i = 0; i < n_tensors; i++) r->producer[i] = r->first_reader[i] = -1;
  for (int i = 0; i < n_ops; i++) {
    char ow[96];
    snprintf(ow, sizeof ow, "%s.ops[%d]", where, i);
    if ((st = read_op(r, ow, json_array_get(ops, (size_t)i), i))) return st;
  }

  int first_input = -1;
  for (int t = 0; t < n_tensors && first_input < 0; t++)
    if (r->producer[t] < 0 && r->first_reader[t] >= 0) first_input = t;
  if ((st = read_boundary(r, where, jb, "input", first_input, &blk->input))) return st;
  if ((st = read_boundary(r, where, jb, "output", blk->ops[n_ops - 1].out, &blk->output))) return st;

  double p = 0;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    p += op_params_f(op);
    if (op->n_experts > 1 || op->kind == OP_ROUTER || op->kind == OP_DISPATCH || op->kind == OP_COMBINE)
      blk->is_moe = true;
  }
  r->params_total += p * (double)repeat;
  if (r->params_total > MAX_PARAMS)
    return gj_failf(r, AP_INVALID, where, "", "the model exceeds %g parameters", MAX_PARAMS);
  return AP_OK;
}

/* ---- The file ---- */

bool graph_json_detect(json_t *root) {
  if (!json_is_object(root)) return false;
  json_t *f = json_object_get(root, "format");
  if (json_is_string(f) && strncmp(json_string_value(f), GRAPH_FORMAT_PREFIX, strlen(GRAPH_FORMAT_PREFIX)) == 0)
    return true;
  return json_is_array(json_object_get(root, "blocks"));
}

static ap_status read_top(rd *r, json_t *root, graph *g) {
  if (!json_is_object(root)) return gj_failf(r, AP_INVALID, "", "", "expected a JSON object at the top level");
  jx_src s = {r->ctx, r->file, ""};
  const char *format = NULL;
  ap_status st = jx_str(&s, root, "format", true, &format, NULL);
  if (st) return st;
  if (strcmp(format, GRAPH_FORMAT) != 0) {
    bool other_version = strncmp(format, GRAPH_FORMAT_PREFIX, strlen(GRAPH_FORMAT_PREFIX)) == 0;
    return gj_failf(r, other_version ? AP_UNSUPPORTED : AP_INVALID, "", "format", "expected \"%s\", got \"%.64s\"%s",
                 GRAPH_FORMAT, format, other_version ? " (a version this autopar does not read)" : "");
  }
  if ((st = gj_check_keys(r, "", root,
                       "format|name|model_type|source|default_seq|dtype|causal_lm|vocab_size|hidden_size|n_layers|"
                       "blocks")))
    return st;
  const char *name = NULL, *model_type = "graph", *source = "";
  if ((st = gj_read_name(r, "", root, "name", true, &name))) return st;
  if ((st = gj_read_name(r, "", root, "model_type", false, &model_type))) return st;
  if ((st = jx_str(&s, root, "source", false, &source, NULL))) return st;
  g->default_seq = 1;
  if ((st = jx_i64(&s, root, "default_seq", false, 1, MAX_SEQ, &g->default_seq, NULL))) return st;
  if ((st = gj_read_dtype(r, "", root, &r->default_dt))) return st;
  if ((st = jx_bool(&s, root, "causal_lm", false, &g->causal_lm, NULL))) return st;
  if ((st = jx_i64(&s, root, "vocab_size", false, 0, MAX_DIM, &g->vocab_size, NULL))) return st;
  if ((st = jx_i64(&s, root, "hidden_size", false, 0, MAX_DIM, &g->hidden_size, NULL))) return st;
  bool has_layers = false;
  if ((st = jx_i64(&s, root, "n_layers", false, 0, MAX_REPEAT * MAX_BLOCKS, &g->n_layers, &has_layers))) return st;
  g->name = arena_strdup(r->a, name);
  g->model_type = arena_strdup(r->a, model_type);
  g->source = arena_strdup(r->a, source);
  if (!g->name || !g->model_type || !g->source) return gj_oom(r);

  json_t *blocks = json_object_get(root, "blocks");
  if (!blocks || json_is_null(blocks)) return gj_failf(r, AP_INVALID, "", "blocks", "required field missing");
  if (!json_is_array(blocks) || json_array_size(blocks) < 1 || json_array_size(blocks) > MAX_BLOCKS)
    return gj_failf(r, AP_INVALID, "", "blocks", "expected an array of 1 to %d blocks", MAX_BLOCKS);
  for (size_t i = 0; i < json_array_size(blocks); i++)
    if ((st = read_block(r, json_array_get(blocks, i), (int)i))) return st;
  if (r->gb.oom) return gj_oom(r);
  if (!has_layers)
    for (int i = 0; i < g->n_blocks; i++)
      if (g->blocks[i].role == BLOCK_LAYER) g->n_layers += g->blocks[i].repeat;
  if ((st = graph_validate(r->ctx, g, r->file))) return st;
  return graph_build_edges(r->ctx, r->a, g);
}

ap_status graph_json_read(ap_ctx *ctx, arena *a, const char *file, json_t *root, graph *out) {
  graph g;
  memset(&g, 0, sizeof g);
  memset(out, 0, sizeof *out);
  rd r = {.ctx = ctx, .a = a, .file = file ? file : "graph", .gb = {.a = a, .ctx = ctx}, .g = &g, .default_dt = DT_BF16};
  ap_status st = read_top(&r, root, &g);
  if (st) return st;
  *out = g;
  return AP_OK;
}
