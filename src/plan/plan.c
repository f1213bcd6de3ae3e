/* The plan type (plan layer): names of its enums, defaults, the rank mapping of its mesh axes, the pipeline
 * split and the validation of a plan against a model and a device count. See plan.h for the conventions
 * (mesh order, expert folding, chunk placement) that every search, the cost model and every exporter share.
 *
 * Validation mirrors the checks Megatron-LM makes before it trains (COSTMODEL.md §6.2): a plan that passes
 * here should start under Megatron, and each message names the constraint and, where it comes from
 * Megatron, the file that enforces it. */
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

/* ---- The plan value (its defaults and equality are table-driven, in plan_fields.c) ---- */

/* a·b for non-negative operands, saturating at INT64_MAX so that products of unchecked degrees never wrap. */
static int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* A product for a message: its digits, or "over 2^63" when mul_sat saturated (a message never shows an
 * overflowed or saturated product as if it were a value). */
static const char *product_str(int64_t v, char *buf, size_t n) {
  if (v == INT64_MAX) snprintf(buf, n, "over 2^63");
  else snprintf(buf, n, "%lld", (long long)v);
  return buf;
}

int64_t plan_edp(const plan *p) {
  int64_t dense = mul_sat(mul_sat(p->tp, p->cp), p->dp);
  int64_t expert = mul_sat(plan_etp(p), p->ep);
  return expert > 0 && dense % expert == 0 ? dense / expert : 0;
}

int64_t plan_n_devices(const plan *p) { return mul_sat(mul_sat(mul_sat(p->dp, p->tp), p->pp), p->cp); }

int64_t plan_n_chunks(const plan *p) { return mul_sat(p->pp, p->vpp); }

/* ---- Rank mapping ---- */

/* True for the axes that live in the expert mesh only. */
bool plan_axis_is_expert(plan_axis a) { return a == PLAN_AXIS_ETP || a == PLAN_AXIS_EP || a == PLAN_AXIS_EDP; }

/* The order position an axis occupies: etp takes tp's, edp takes dp's. */
plan_axis plan_axis_token(plan_axis a) {
  return a == PLAN_AXIS_ETP ? PLAN_AXIS_TP : a == PLAN_AXIS_EDP ? PLAN_AXIS_DP : a;
}

/* The size at order token t in the dense or the expert mesh (Megatron builds the two RankGenerators with
 * ep = 1 and cp = 1 respectively, parallel_state.py). */
int64_t plan_mesh_degree(const plan *p, bool expert, plan_axis t) {
  switch (t) {
  case PLAN_AXIS_TP: return expert ? plan_etp(p) : p->tp;
  case PLAN_AXIS_CP: return expert ? 1 : p->cp;
  case PLAN_AXIS_EP: return expert ? p->ep : 1;
  case PLAN_AXIS_DP: return expert ? plan_edp(p) : p->dp;
  case PLAN_AXIS_PP: return p->pp;
  default: return 0;
  }
}

/* The position of order token t in p->order, or -1. */
static int order_pos(const plan *p, plan_axis t) {
  for (int i = 0; i < PLAN_N_ORDER; i++)
    if (p->order[i] == t) return i;
  return -1;
}

static bool order_is_permutation(const plan *p) {
  unsigned seen = 0;
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    if ((unsigned)p->order[i] >= PLAN_N_ORDER) return false;
    seen |= 1u << p->order[i];
  }
  return seen == (1u << PLAN_N_ORDER) - 1;
}

int64_t plan_axis_size(const plan *p, plan_axis axis) {
  switch (axis) {
  case PLAN_AXIS_TP: return p->tp;
  case PLAN_AXIS_CP: return p->cp;
  case PLAN_AXIS_EP: return p->ep;
  case PLAN_AXIS_DP: return p->dp;
  case PLAN_AXIS_PP: return p->pp;
  case PLAN_AXIS_ETP: return plan_etp(p);
  case PLAN_AXIS_EDP: return plan_edp(p);
  default: return 0;
  }
}

/* The stride of order token t in one mesh: the product of the sizes inside it. */
static int64_t mesh_stride(const plan *p, bool expert, plan_axis t) {
  int pos = order_pos(p, t);
  if (pos < 0 || !order_is_permutation(p)) return 0;
  int64_t stride = 1;
  for (int i = 0; i < pos; i++) stride = mul_sat(stride, plan_mesh_degree(p, expert, p->order[i]));
  return stride;
}

int64_t plan_axis_stride(const plan *p, plan_axis axis) {
  if ((unsigned)axis >= PLAN_AXIS_COUNT_) return 0;
  return mesh_stride(p, plan_axis_is_expert(axis), plan_axis_token(axis));
}

bool plan_axes_group(const plan *p, unsigned axes, int64_t *stride, int64_t *size) {
  const unsigned expert_bits = 1u << PLAN_AXIS_ETP | 1u << PLAN_AXIS_EP | 1u << PLAN_AXIS_EDP;
  const unsigned dense_bits = 1u << PLAN_AXIS_TP | 1u << PLAN_AXIS_CP | 1u << PLAN_AXIS_DP;
  if ((axes & expert_bits) && (axes & dense_bits)) return false;
  if (axes & ~((1u << PLAN_AXIS_COUNT_) - 1)) return false;
  if (!order_is_permutation(p)) return false;
  bool expert = (axes & expert_bits) != 0;
  /* Mark the order positions the axes take, then require the non-trivial ones to be adjacent. */
  bool in_group[PLAN_N_ORDER] = {false};
  for (int a = 0; a < PLAN_AXIS_COUNT_; a++)
    if (axes & (1u << a)) in_group[order_pos(p, plan_axis_token((plan_axis)a))] = true;
  int first = -1, last = -1;
  for (int i = 0; i < PLAN_N_ORDER; i++)
    if (in_group[i] && plan_mesh_degree(p, expert, p->order[i]) > 1) {
      if (first < 0) first = i;
      last = i;
    }
  *stride = 1;
  *size = 1;
  if (first < 0) return true; /* every axis has degree 1: groups of one rank */
  for (int i = first; i <= last; i++)
    if (!in_group[i] && plan_mesh_degree(p, expert, p->order[i]) > 1) return false;
  for (int i = 0; i < first; i++) *stride = mul_sat(*stride, plan_mesh_degree(p, expert, p->order[i]));
  for (int i = first; i <= last; i++)
    if (in_group[i]) *size = mul_sat(*size, plan_mesh_degree(p, expert, p->order[i]));
  return true;
}

/* ---- Pipeline split ---- */

bool plan_split_even(int64_t n_layers, int64_t n_chunks, int32_t *out) {
  if (n_chunks < 1 || n_chunks > PLAN_MAX_CHUNKS || n_chunks > n_layers || n_layers / n_chunks >= INT32_MAX)
    return false;
  int32_t base = (int32_t)(n_layers / n_chunks);
  int64_t extra = n_layers % n_chunks;
  for (int64_t c = 0; c < n_chunks; c++) out[c] = base;
  /* The remainder goes to the middle chunks first: the first chunk also runs the embedding and the last one
   * the head (torchtitan's pipeline_parallel_first/last_stage_less_layers default to 1 for the same reason).
   * extra < n_chunks, so at most chunks 1 .. n_chunks-2 and then chunk 0 receive one more; the last chunk,
   * whose LM head and loss are the heaviest non-layer work, never does. */
  for (int64_t c = 1; c < n_chunks - 1 && extra > 0; c++, extra--) out[c]++;
  if (extra > 0) out[0]++;
  return true;
}

bool plan_split_default(int64_t n_layers, int64_t n_chunks, int32_t *out) {
  if (n_chunks <= n_layers) return plan_split_even(n_layers, n_chunks, out);
  /* Megatron's --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
   * (megatron/training/arguments.py @d98e8a64): the embedding and the loss count as one layer each, the
   * n_layers + 2 spread evenly, the first chunk giving its place to the embedding and the last to the loss. */
  if (n_chunks > n_layers + 2 || !plan_split_even(n_layers + 2, n_chunks, out)) return false;
  out[0]--;
  out[n_chunks - 1]--;
  return true;
}

void plan_state_split(plan *p, int64_t n_layers) {
  p->n_stage_layers = 0;
  int64_t c = plan_n_chunks(p);
  if (c > n_layers && c <= PLAN_MAX_CHUNKS && plan_split_default(n_layers, c, p->stage_layers)) p->n_stage_layers = (int32_t)c;
}

bool plan_chunk_layers(const plan *p, int64_t n_layers, int32_t *out) {
  int64_t n = plan_n_chunks(p);
  if (n < 1 || n > PLAN_MAX_CHUNKS) return false;
  if (p->n_stage_layers == 0) return plan_split_default(n_layers, n, out);
  if (p->n_stage_layers != n) return false;
  memcpy(out, p->stage_layers, (size_t)n * sizeof out[0]);
  return true;
}

bool plan_layer_recomputes(const plan *p, int64_t chunk, int64_t i) {
  if (p->recompute != PLAN_RECOMPUTE_FULL) return false;
  if (p->n_chunk_recompute > 0)
    return chunk >= 0 && chunk < p->n_chunk_recompute && chunk < PLAN_MAX_CHUNKS && i < p->chunk_recompute_layers[chunk];
  return p->recompute_layers == 0 || i < p->recompute_layers;
}

/* ---- Validation ---- */

/* Records "<file>: <message>" as AP_INVALID. */
static ap_status fail(ap_ctx *ctx, const char *file, const char *fmt, ...) AP_PRINTF(3, 4);
static ap_status fail(ap_ctx *ctx, const char *file, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ctx_fail(ctx, AP_INVALID, "%s: %s", file ? file : "plan", msg);
}

/* The ranges of the field table (plan_fields.c): integers within theirs, enums naming a value, lists within
 * PLAN_MAX_CHUNKS entries. */
static ap_status check_ranges(ap_ctx *ctx, const plan *p, const char *file) {
  size_t n_fields;
  const plan_field *fields = plan_fields(&n_fields);
  for (size_t i = 0; i < n_fields; i++) {
    const plan_field *f = &fields[i];
    if (f->kind != PLAN_FK_INT && f->kind != PLAN_FK_ENUM && f->kind != PLAN_FK_LIST) continue;
    int64_t v = plan_field_int(p, f);
    if (f->kind == PLAN_FK_INT && (v < f->min || v > f->max))
      return fail(ctx, file, "%s = %lld must be in [%lld, %lld]", plan_field_name(f->id), (long long)v,
                  (long long)f->min, (long long)f->max);
    if (f->kind == PLAN_FK_ENUM && (v < 0 || v >= f->n_names))
      return fail(ctx, file, "%s = %lld must be one of %s", plan_field_name(f->id), (long long)v, f->help);
    if (f->kind == PLAN_FK_LIST && (v < 0 || v > PLAN_MAX_CHUNKS))
      return fail(ctx, file, "%s lists %lld chunks; at most %d", plan_field_name(f->id), (long long)v,
                  PLAN_MAX_CHUNKS);
  }
  if (!order_is_permutation(p)) {
    char got[64] = "";
    for (int i = 0; i < PLAN_N_ORDER; i++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "-" : "", plan_axis_name(p->order[i]));
    return fail(ctx, file, "order %s must list each of tp, cp, ep, dp, pp once", got);
  }
  return AP_OK;
}

/* The model's constraints on the degrees: what tensor, context and expert parallelism can split. */
static ap_status check_model(ap_ctx *ctx, const plan *p, const plan_model_facts *f, const char *file) {
  if (!f->has_layers) {
    /* A general graph (no transformer layers): tensor, context and expert parallelism need the per-op
     * sharding specs that this plan type does not carry, so only dp and pp (over blocks) apply. */
    if (p->tp > 1 || p->cp > 1 || p->ep > 1)
      return fail(ctx, file, "the model has no layer blocks, so only dp and pp apply; got tp = %lld, cp = %lld, ep = %lld",
                  (long long)p->tp, (long long)p->cp, (long long)p->ep);
    return AP_OK;
  }
  if (p->tp > 1 && !f->has_tp_ops)
    return fail(ctx, file, "tp = %lld needs tensor-parallel ops, and the model has none", (long long)p->tp);
  /* Megatron TransformerConfig / arguments.py: num_attention_heads % tp == 0 and num_query_groups % tp == 0. */
  if (f->n_attention_ops > 0 && f->heads % p->tp != 0)
    return fail(ctx, file, "tp = %lld must divide num_attention_heads = %lld", (long long)p->tp, (long long)f->heads);
  if (f->n_attention_ops > 0 && f->kv_heads % p->tp != 0)
    return fail(ctx, file, "tp = %lld must divide num_query_groups (KV heads) = %lld (Megatron arguments.py)",
                (long long)p->tp, (long long)f->kv_heads);
  if (p->cp > 1 && f->n_attention_ops == 0)
    return fail(ctx, file, "cp = %lld needs attention to split, and the model has none", (long long)p->cp);
  if (f->n_experts == 0) {
    /* Megatron arguments.py: "num_experts must be non None to use expert model parallelism". */
    if (p->ep > 1) return fail(ctx, file, "ep = %lld needs routed experts, and the model is dense", (long long)p->ep);
    return AP_OK;
  }
  /* From here the model has routed experts. Megatron arguments.py: num_experts % ep == 0. */
  if (f->n_experts % p->ep != 0)
    return fail(ctx, file, "ep = %lld must divide num_experts = %lld", (long long)p->ep, (long long)f->n_experts);
  /* Megatron arguments.py: "When using MoE and tensor parallelism, sequence parallelism must be used." */
  if (p->tp > 1 && !p->sequence_parallel)
    return fail(ctx, file, "tp = %lld with experts needs sequence_parallel (Megatron arguments.py)", (long long)p->tp);
  /* The expert mesh folds into the dense one: world = tp·cp·dp·pp = etp·ep·edp·pp (parallel_state.py,
   * "world_size is not divisible by expert_tensor_model_pipeline_parallel size"). */
  int64_t etp = plan_etp(p), dense = mul_sat(mul_sat(p->tp, p->cp), p->dp);
  if (plan_edp(p) == 0)
    return fail(ctx, file, "etp·ep = %lld·%lld = %s must divide tp·cp·dp = %lld·%lld·%lld = %s (expert parallel folding)",
                (long long)etp, (long long)p->ep, product_str(mul_sat(etp, p->ep), (char[32]){0}, 32), (long long)p->tp,
                (long long)p->cp, (long long)p->dp, product_str(dense, (char[32]){0}, 32));
  /* parallel_state.py: "When not using pp-last rank ordering, the data parallel size of the attention and moe
   * layers must be the same", and the pipeline groups of the two meshes must be identical. */
  if (p->pp > 1 && p->order[PLAN_N_ORDER - 1] != PLAN_AXIS_PP && plan_edp(p) != p->dp)
    return fail(ctx, file, "with pp not outermost in the order, edp = %lld must equal dp = %lld (Megatron parallel_state.py)",
                (long long)plan_edp(p), (long long)p->dp);
  int64_t s_dense = mesh_stride(p, false, PLAN_AXIS_PP), s_expert = mesh_stride(p, true, PLAN_AXIS_PP);
  if (p->pp > 1 && s_dense != s_expert)
    return fail(ctx, file, "pipeline groups differ between the dense mesh (stride %lld) and the expert mesh (stride %lld); "
                "reorder the axes (Megatron parallel_state.py)", (long long)s_dense, (long long)s_expert);
  return AP_OK;
}

/* The pipeline: chunk count against the layers, the schedule's needs, an explicit split. */
static ap_status check_pipeline(ap_ctx *ctx, const plan *p, const plan_model_facts *f, const char *file) {
  const char *unit = f->has_layers ? "layers" : "blocks";
  int64_t n = plan_n_chunks(p);
  const char *sched = plan_schedule_name(p->schedule);
  if (n > PLAN_MAX_CHUNKS)
    return fail(ctx, file, "pp·vpp = %lld·%lld = %lld pipeline chunks exceed the limit of %d", (long long)p->pp,
                (long long)p->vpp, (long long)n, PLAN_MAX_CHUNKS);
  /* Without a split, up to two chunks more than layers take Megatron's embedding and loss accounting
   * (plan_split_default): an embedding-only first and a head-only last chunk, as the planner splits them. */
  if (p->n_stage_layers == 0 && n > f->n_layers + (f->has_layers ? 2 : 0))
    return fail(ctx, file, "pp·vpp = %lld·%lld = %lld pipeline chunks exceed the model's %lld %s%s", (long long)p->pp,
                (long long)p->vpp, (long long)n, (long long)f->n_layers, unit,
                f->has_layers ? " by more than the embedding-only and the head-only chunk (give the split with "
                                "stage_layers, --stage-layers)"
                              : "");
  switch (p->schedule) {
  case PLAN_SCHED_INTERLEAVED_1F1B:
    if (p->vpp < 2) return fail(ctx, file, "%s needs vpp >= 2, got vpp = %lld", sched, (long long)p->vpp);
    /* parallel_state.py: "pipeline-model-parallel size should be greater than 1 with interleaved schedule". */
    if (p->pp < 2) return fail(ctx, file, "%s needs pp >= 2, got pp = %lld", sched, (long long)p->pp);
    /* Megatron schedules.py (releases up to core 0.9): "number of microbatches is not divisible by
     * pipeline-parallel size when using interleaved schedule". Newer releases relax it with
     * microbatch_group_size_per_vp_stage (COSTMODEL.md §7 item 3); the strict form holds for all. */
    if (p->n_micro_batches % p->pp != 0)
      return fail(ctx, file, "n_micro_batches = %lld must be a multiple of pp = %lld for %s (Megatron schedules.py)",
                  (long long)p->n_micro_batches, (long long)p->pp, sched);
    break;
  case PLAN_SCHED_ZB_V:
    /* Qi et al. 2024 §6: the V schedule places exactly two chunks on each rank. */
    if (p->vpp != 2) return fail(ctx, file, "%s needs vpp = 2, got vpp = %lld", sched, (long long)p->vpp);
    if (p->pp < 2) return fail(ctx, file, "%s needs pp >= 2, got pp = %lld", sched, (long long)p->pp);
    break;
  default:
    if (p->vpp != 1)
      return fail(ctx, file, "vpp = %lld needs schedule interleaved-1f1b or zb-v, got %s", (long long)p->vpp, sched);
    break;
  }
  if (p->n_stage_layers == 0) return AP_OK;
  if (p->n_stage_layers != n)
    return fail(ctx, file, "stage_layers lists %d chunks, but pp·vpp = %lld·%lld = %lld", p->n_stage_layers,
                (long long)p->pp, (long long)p->vpp, (long long)n);
  int64_t sum = 0;
  for (int32_t c = 0; c < p->n_stage_layers; c++) {
    int32_t v = p->stage_layers[c];
    /* A transformer may leave its first or last chunk without layers: an embedding-only or a head-only stage,
     * as Megatron's --pipeline-model-parallel-layout allows ("E|t|…|L"). Elsewhere a chunk needs a layer. */
    bool end = c == 0 || c == p->n_stage_layers - 1;
    if (v < 0 || (v == 0 && !(end && f->has_layers)))
      return fail(ctx, file, "stage_layers[%d] = %d must be >= 1%s", c, v,
                  f->has_layers ? " (only the first and the last chunk may be empty)" : "");
    sum += v;
  }
  if (sum != f->n_layers)
    return fail(ctx, file, "stage_layers sum to %lld, but the model has %lld %s", (long long)sum, (long long)f->n_layers,
                unit);
  return AP_OK;
}

ap_status plan_validate(ap_ctx *ctx, const plan *p, const graph *g, int64_t n_devices, const char *file) {
  ap_status st;
  if ((st = check_ranges(ctx, p, file))) return st;
  int64_t devices = plan_n_devices(p);
  if (n_devices > 0 && devices != n_devices)
    return fail(ctx, file, "dp·tp·pp·cp = %lld·%lld·%lld·%lld = %s must equal the cluster's %lld devices",
                (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)p->cp,
                product_str(devices, (char[32]){0}, 32), (long long)n_devices);
  plan_model_facts f;
  plan_model_facts_of(g, &f);
  if ((st = check_model(ctx, p, &f, file))) return st;
  if ((st = check_pipeline(ctx, p, &f, file))) return st;

  /* Megatron arguments.py: num_micro_batches = global_batch_size / (micro_batch_size · dp). */
  int64_t batch = mul_sat(mul_sat(p->micro_batch_size, p->n_micro_batches), p->dp);
  if (batch != p->global_batch_size)
    return fail(ctx, file, "global_batch_size = %lld must equal micro_batch_size·n_micro_batches·dp = %lld·%lld·%lld = %s",
                (long long)p->global_batch_size, (long long)p->micro_batch_size, (long long)p->n_micro_batches,
                (long long)p->dp, product_str(batch, (char[32]){0}, 32));

  int64_t seq = p->seq_length > 0 ? p->seq_length : f.default_seq;
  if (f.uses_seq && seq <= 0) return fail(ctx, file, "seq_length must be set: the model has no default sequence length");
  /* Context parallelism with load balancing cuts the sequence into 2·cp pieces (Megatron's CP, each rank
   * taking one chunk from each end to balance causal attention). */
  if (p->cp > 1 && seq % (2 * p->cp) != 0)
    return fail(ctx, file, "seq_length = %lld must be a multiple of 2·cp = %lld", (long long)seq, (long long)(2 * p->cp));
  /* Sequence parallelism scatters each context-parallel rank's seq/cp tokens over the tp ranks. */
  if (p->sequence_parallel && p->tp > 1 && seq % mul_sat(p->tp, p->cp) != 0)
    return fail(ctx, file, "seq_length = %lld must be a multiple of tp·cp = %lld·%lld = %lld with sequence_parallel",
                (long long)seq, (long long)p->tp, (long long)p->cp, (long long)mul_sat(p->tp, p->cp));

  if (p->recompute != PLAN_RECOMPUTE_FULL && p->recompute_layers != 0)
    return fail(ctx, file, "recompute_layers = %d applies only to full recompute, got %s (Megatron TransformerConfig)",
                p->recompute_layers, plan_recompute_name(p->recompute));
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0) {
    int32_t layers[PLAN_MAX_CHUNKS];
    int32_t most = 0;
    if (plan_chunk_layers(p, f.n_layers, layers))
      for (int64_t c = 0; c < plan_n_chunks(p); c++)
        if (layers[c] > most) most = layers[c];
    if (p->recompute_layers > most)
      return fail(ctx, file, "recompute_layers = %d exceeds the %d layers of the largest pipeline chunk",
                  p->recompute_layers, most);
  }
  /* Per-chunk recompute counts (the layer-wise search's plans): full recompute, one count per chunk, each
   * within its chunk; recompute_layers must not also be stated, so that only one rule applies. */
  if (p->n_chunk_recompute > 0) {
    if (p->recompute != PLAN_RECOMPUTE_FULL)
      return fail(ctx, file, "recompute per_chunk applies only to full recompute, got %s", plan_recompute_name(p->recompute));
    if (p->recompute_layers != 0)
      return fail(ctx, file, "recompute per_chunk and recompute_layers = %d exclude each other; set recompute_layers to 0",
                  p->recompute_layers);
    if (p->n_chunk_recompute != plan_n_chunks(p))
      return fail(ctx, file, "recompute per_chunk lists %d chunks, but pp·vpp = %lld·%lld = %lld", p->n_chunk_recompute,
                  (long long)p->pp, (long long)p->vpp, (long long)plan_n_chunks(p));
    int32_t layers[PLAN_MAX_CHUNKS];
    if (!plan_chunk_layers(p, f.n_layers, layers))
      return fail(ctx, file, "cannot split %lld layers into %lld chunks", (long long)f.n_layers, (long long)plan_n_chunks(p));
    for (int32_t c = 0; c < p->n_chunk_recompute; c++)
      if (p->chunk_recompute_layers[c] < 0 || p->chunk_recompute_layers[c] > layers[c])
        return fail(ctx, file, "recompute per_chunk[%d] = %d must be in [0, %d], the layers of chunk %d", c,
                    p->chunk_recompute_layers[c], layers[c], c);
  }
  /* Megatron arguments.py: "Tensor parallel communication/GEMM overlap can happen only when sequence
   * parallelism is enabled". With tp = 1 there is nothing to overlap and the flag is a no-op. */
  if (p->tp_comm_overlap && p->tp > 1 && !p->sequence_parallel)
    return fail(ctx, file, "tp_comm overlap with tp = %lld needs sequence_parallel (Megatron arguments.py)",
                (long long)p->tp);
  /* Offload (DeepSpeed docs/_pages/config-json.md): offload_optimizer is valid with ZeRO stages 1-3,
   * offload_param only with stage 3, and NVMe (ZeRO-Infinity) only with stage 3. */
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE && p->zero_stage < 1)
    return fail(ctx, file, "offload_optimizer %s needs a sharded optimizer (zero_stage >= 1), got zero_stage 0",
                plan_offload_name(p->offload_optimizer));
  if (p->offload_param != PLAN_OFFLOAD_NONE && p->zero_stage < 3)
    return fail(ctx, file, "offload_param %s needs zero_stage 3 (DeepSpeed), got %d", plan_offload_name(p->offload_param),
                p->zero_stage);
  if (p->offload_optimizer == PLAN_OFFLOAD_NVME && p->zero_stage < 3)
    return fail(ctx, file, "offload_optimizer nvme needs zero_stage 3 (ZeRO-Infinity), got %d", p->zero_stage);
  return AP_OK;
}
