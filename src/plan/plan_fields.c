/* The plan's fields, one table (plan layer): every fact about a field of struct plan (plan.h) written once.
 * Each row gives the field's canonical name (a Python identifier, the same as the C member, the JSON key and
 * the runs.csv column wherever those exist; the CLI's flag is it with dashes, --micro-batch-size), where the
 * JSON form keeps it, the other spellings in use (the habitual CLI flag first, mbs, then Megatron-LM's
 * argument names), its runs.csv column, its range and its default. plan.c (defaults, equality, range checks), plan_json.c (reader and writer), plan_api.c
 * (ap_plan_set and ap_plan_key, from which the CLI's flags, its help, the man page, the bash completion and
 * the Python keywords come), report/plan_report.c (--fix), search/search.c (fixed fields), search/complete.c (stated
 * fields) and report/runs_csv.c (the runs.csv reader) all walk it, so a new field is one row here.
 *
 * The enum-name tables of the plan's enums live here too (AP_ENUM_NAMES), since the enum fields read and write
 * their values by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

AP_ENUM_NAMES(plan_axis, plan_axis, PLAN_AXIS_MAP, PLAN_AXIS_COUNT_)
AP_ENUM_NAMES(plan_schedule, plan_schedule, PLAN_SCHEDULE_MAP, PLAN_SCHED_COUNT_)
AP_ENUM_NAMES(plan_recompute, plan_recompute, PLAN_RECOMPUTE_MAP, PLAN_RECOMPUTE_COUNT_)
AP_ENUM_NAMES(plan_precision, plan_precision, PLAN_PRECISION_MAP, PLAN_PREC_COUNT_)
AP_ENUM_NAMES(plan_stack, plan_stack, PLAN_STACK_MAP, PLAN_STACK_COUNT_)
AP_ENUM_NAMES(plan_offload, plan_offload, PLAN_OFFLOAD_MAP, PLAN_OFFLOAD_COUNT_)
AP_ENUM_NAMES(plan_dim_spec, plan_dim_spec, PLAN_DIM_SPEC_MAP, PLAN_DIM_COUNT_)
AP_ENUM_NAMES(plan_field, plan_field_id, PLAN_FIELD_MAP, PLAN_F_COUNT_)

/* Enum members are read and written through an int (plan_field_int). */
_Static_assert(sizeof(plan_schedule) == sizeof(int) && sizeof(plan_recompute) == sizeof(int) &&
                   sizeof(plan_precision) == sizeof(int) && sizeof(plan_stack) == sizeof(int) && sizeof(plan_offload) == sizeof(int),
               "plan enums are int-sized");

/* The most layers one chunk may list, and the most a recompute count may name. TUNING: ten times the deepest
 * published transformer (GPT-3's 96 and Llama 3.1 405B's 126 layers are far below it); it only keeps a typo
 * from looking like a plan. */
#define PLAN_MAX_LAYERS 1000000

/* The longest sequence a plan may state, tokens. TUNING: six times the longest published context window
 * (Llama 4 Scout's 10M tokens, Meta's model card, April 2025); only keeps a typo (--seq 99999999999) from
 * reaching the cost model, where it would read as a plan that does not fit (exit 1) rather than bad input. */
#define PLAN_MAX_SEQ ((int64_t)1 << 26)

static int64_t etp_resolved(const plan *p) { return plan_etp(p); }

#define M(m) offsetof(plan, m), sizeof(((plan *)0)->m)
#define ENUM(t) t##_names_, (int)AP_COUNT(t##_names_)
#define NO_ENUM NULL, 0

/* In the JSON document's order (docs/plan-format.md); the writer opens a section where the section changes.
 * Megatron-LM's names (megatron/training/arguments.py) are the aliases a Megatron user types. */
static const plan_field table[] = {
    {PLAN_F_MODEL, PLAN_FK_NAME, "", "model", "", NULL, M(model), 0, 0, 0, 0, NO_ENUM, "", NULL, PLAN_FF_NO_KEY,
     "the model preset or path"},
    {PLAN_F_CLUSTER, PLAN_FK_NAME, "", "cluster", "", NULL, M(cluster), 0, 0, 0, 0, NO_ENUM, "", NULL, PLAN_FF_NO_KEY,
     "the cluster spec"},
    {PLAN_F_GLOBAL_BATCH_SIZE, PLAN_FK_INT, "", "global_batch_size", "gbs", "global_batch_size",
     M(global_batch_size), 0, 1, PLAN_MAX_COUNT, 1, NO_ENUM, "", NULL, PLAN_FF_PROBLEM, "global batch, sequences"},
    {PLAN_F_SEQ_LENGTH, PLAN_FK_INT, "", "seq_length", "seq", "seq_length", M(seq_length), 0, 0, PLAN_MAX_SEQ, 0,
     NO_ENUM, "", NULL, PLAN_FF_PROBLEM | PLAN_FF_BINARY_SUFFIX,
     "sequence length, tokens; 8k = 8192, 32k = 32768, as context lengths are counted (0 = the model's pretraining context)"},
    {PLAN_F_DP, PLAN_FK_INT, "parallel", "dp", "", "dp", M(dp), 0, 1, PLAN_MAX_DEGREE, 1,
     NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "data-parallel degree"},
    {PLAN_F_TP, PLAN_FK_INT, "parallel", "tp", "tensor_model_parallel_size", "tp", M(tp), 0, 1, PLAN_MAX_DEGREE, 1,
     NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "tensor-parallel degree"},
    {PLAN_F_PP, PLAN_FK_INT, "parallel", "pp", "pipeline_model_parallel_size", "pp", M(pp), 0, 1, PLAN_MAX_DEGREE,
     1, NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "pipeline-parallel degree"},
    {PLAN_F_CP, PLAN_FK_INT, "parallel", "cp", "context_parallel_size", "cp", M(cp), 0, 1, PLAN_MAX_DEGREE, 1,
     NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "context-parallel degree"},
    {PLAN_F_EP, PLAN_FK_INT, "parallel", "ep", "expert_model_parallel_size", "ep", M(ep), 0, 1, PLAN_MAX_DEGREE, 1,
     NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "expert-parallel degree"},
    {PLAN_F_ETP, PLAN_FK_INT, "parallel", "etp", "expert_tensor_parallel_size", NULL, M(etp), 0, 0,
     PLAN_MAX_DEGREE, 0, NO_ENUM, "", etp_resolved, PLAN_FF_SEARCHED, "expert tensor-parallel degree (0 = tp)"},
    {PLAN_F_VPP, PLAN_FK_INT, "parallel", "vpp", "num_virtual_stages_per_pipeline_rank|virtual_pipeline_model_parallel_size", "vpp", M(vpp), 0, 1,
     PLAN_MAX_CHUNKS, 1, NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "virtual stages per pipeline rank"},
    {PLAN_F_ORDER, PLAN_FK_ORDER, "parallel", "order", "", NULL, M(order), 0, 0, 0, 0, NO_ENUM, "", NULL,
     PLAN_FF_SEARCHED, "mesh order, innermost first, e.g. tp,cp,ep,dp,pp"},
    {PLAN_F_SCHEDULE, PLAN_FK_ENUM, "pipeline", "schedule", "", NULL, M(schedule), 0, 0, 0,
     PLAN_SCHED_1F1B, ENUM(plan_schedule), "", NULL, PLAN_FF_SEARCHED, AP_ENUM_LIST(PLAN_SCHEDULE_MAP)},
    {PLAN_F_MICRO_BATCH_SIZE, PLAN_FK_INT, "pipeline", "micro_batch_size", "mbs", "micro_batch_size",
     M(micro_batch_size), 0, 1, PLAN_MAX_COUNT, 1, NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "micro-batch size, sequences"},
    {PLAN_F_N_MICRO_BATCHES, PLAN_FK_INT, "pipeline", "n_micro_batches", "micro_batches", NULL, M(n_micro_batches),
     0, 1, PLAN_MAX_COUNT, 1, NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "micro-batches per iteration"},
    {PLAN_F_STAGE_LAYERS, PLAN_FK_LIST, "pipeline", "stage_layers", "", NULL, M(stage_layers),
     offsetof(plan, n_stage_layers), 0, PLAN_MAX_LAYERS, 0, NO_ENUM, "", NULL, PLAN_FF_SEARCHED,
     "layers per pipeline chunk, e.g. 20,20,20,20"},
    {PLAN_F_SEQUENCE_PARALLEL, PLAN_FK_BOOL, "", "sequence_parallel", "sp", "sequence_parallel",
     M(sequence_parallel), 0, 0, 1, 0, NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "sequence parallel (0 or 1)"},
    {PLAN_F_RECOMPUTE, PLAN_FK_ENUM, "recompute", "granularity", "recompute_granularity", "recompute",
     M(recompute), 0, 0, 0, PLAN_RECOMPUTE_NONE, ENUM(plan_recompute), "", NULL, PLAN_FF_SEARCHED,
     AP_ENUM_LIST(PLAN_RECOMPUTE_MAP)},
    {PLAN_F_RECOMPUTE_LAYERS, PLAN_FK_INT, "recompute", "num_layers", "recompute_num_layers", NULL,
     M(recompute_layers), 0, 0, PLAN_MAX_LAYERS, 0, NO_ENUM, "", NULL, PLAN_FF_SEARCHED,
     "layers per chunk with full recompute (0 = all)"},
    {PLAN_F_CHUNK_RECOMPUTE_LAYERS, PLAN_FK_LIST, "recompute", "per_chunk", "", NULL, M(chunk_recompute_layers),
     offsetof(plan, n_chunk_recompute), 0, PLAN_MAX_LAYERS, 0, NO_ENUM, "", NULL, PLAN_FF_OMIT_DEFAULT | PLAN_FF_NO_KEY,
     "layers with full recompute, per chunk"},
    {PLAN_F_ZERO_STAGE, PLAN_FK_INT, "optimizer", "zero_stage", "zero", "zero_stage", M(zero_stage), 0, 0, 3, 1,
     NO_ENUM, "", NULL, PLAN_FF_SEARCHED, "ZeRO stage 0-3"},
    /* Not searched: the planner turns offload on only when nothing fits without it (report/plan_report.c). */
    {PLAN_F_OFFLOAD_OPTIMIZER, PLAN_FK_ENUM, "optimizer", "offload_optimizer", "", NULL,
     M(offload_optimizer), 0, 0, 0, PLAN_OFFLOAD_NONE, ENUM(plan_offload), "", NULL, PLAN_FF_OMIT_DEFAULT,
     "optimizer states to none, cpu or nvme (needs zero >= 1; nvme zero 3)"},
    {PLAN_F_OFFLOAD_PARAM, PLAN_FK_ENUM, "optimizer", "offload_param", "", NULL, M(offload_param), 0,
     0, 0, PLAN_OFFLOAD_NONE, ENUM(plan_offload), "", NULL, PLAN_FF_OMIT_DEFAULT,
     "parameters to none, cpu or nvme (needs zero 3)"},
    /* mxfp8 (Blackwell's block-scaled fp8, as runs.csv states it) runs its GEMMs at the fp8 rate, which is
     * what the plan's fp8 means. */
    {PLAN_F_PRECISION, PLAN_FK_ENUM, "", "precision", "", "precision", M(precision), 0, 0, 0,
     PLAN_PREC_BF16, ENUM(plan_precision), "mxfp8=fp8", NULL, PLAN_FF_SEARCHED, AP_ENUM_LIST(PLAN_PRECISION_MAP)},
    {PLAN_F_FUSED_LOSS, PLAN_FK_BOOL, "", "fused_loss", "", NULL, M(fused_loss), 0, 0, 1, 0, NO_ENUM, "",
     NULL, PLAN_FF_OMIT_DEFAULT, "fused in-place cross entropy (0 or 1)"},
    /* The software stack (plan/stack.h); runs.csv's stack column. Not named = the model's default. */
    {PLAN_F_STACK, PLAN_FK_ENUM, "", "stack", "", "stack", M(stack), 0, 0, 0, PLAN_STACK_DEFAULT,
     ENUM(plan_stack), "", NULL, PLAN_FF_OMIT_DEFAULT,
     AP_ENUM_LIST(PLAN_STACK_NAMED_MAP)},
    {PLAN_F_OVERLAP_GRAD_REDUCE, PLAN_FK_BOOL, "overlap", "grad_reduce", "", NULL,
     M(overlap_grad_reduce), 0, 0, 1, 1, NO_ENUM, "", NULL, 0, "overlap gradient reduction"},
    {PLAN_F_OVERLAP_PARAM_GATHER, PLAN_FK_BOOL, "overlap", "param_gather", "", NULL,
     M(overlap_param_gather), 0, 0, 1, 1, NO_ENUM, "", NULL, 0, "overlap parameter gather"},
    {PLAN_F_TP_COMM_OVERLAP, PLAN_FK_BOOL, "overlap", "tp_comm", "", NULL, M(tp_comm_overlap), 0, 0,
     1, 0, NO_ENUM, "", NULL, 0, "TP communication overlap"},
};
_Static_assert(AP_COUNT(table) == PLAN_F_COUNT_, "one row per plan field");

#undef M
#undef ENUM
#undef NO_ENUM

const plan_field *plan_fields(size_t *n_out) {
  *n_out = AP_COUNT(table);
  return table;
}

const plan_field *plan_field_get(plan_field_id id) {
  for (size_t i = 0; i < AP_COUNT(table); i++)
    if (table[i].id == id) return &table[i];
  return NULL;
}

void plan_field_flag(plan_field_id id, char *out, size_t n) {
  if (!n) return;
  snprintf(out, n, "%s", plan_field_name(id));
  for (char *c = out; *c; c++)
    if (*c == '_') *c = '-';
}

/* a and b equal with '-' and '_' the same. */
static bool same_key(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = *a == '-' ? '_' : *a, y = *b == '-' ? '_' : *b;
    if (x != y) return false;
  }
  return *a == *b;
}

/* True when key is one of the '|'-separated names in list. */
static bool in_list(const char *key, const char *list) {
  char name[96];
  for (const char *q = list; q && *q;) {
    const char *bar = strchr(q, '|');
    size_t len = bar ? (size_t)(bar - q) : strlen(q);
    snprintf(name, sizeof name, "%.*s", (int)len, q);
    if (same_key(key, name)) return true;
    q = bar ? bar + 1 : q + len;
  }
  return false;
}

const plan_field *plan_field_find(const char *key) {
  if (!key) return NULL;
  for (size_t i = 0; i < AP_COUNT(table); i++) {
    const plan_field *f = &table[i];
    if (same_key(key, plan_field_name(f->id)) || in_list(key, f->aliases))
      return f;
  }
  return NULL;
}

int64_t plan_field_int(const plan *p, const plan_field *f) {
  const char *at = (const char *)p + f->offset;
  switch (f->kind) {
  case PLAN_FK_INT: {
    if (f->size == sizeof(int32_t)) {
      int32_t v;
      memcpy(&v, at, sizeof v);
      return v;
    }
    int64_t v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case PLAN_FK_BOOL: return *(const bool *)at ? 1 : 0;
  case PLAN_FK_ENUM: {
    int v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case PLAN_FK_LIST: {
    int32_t n;
    memcpy(&n, (const char *)p + f->count_offset, sizeof n);
    return n;
  }
  default: return 0;
  }
}

void plan_field_set_int(plan *p, const plan_field *f, int64_t v) {
  char *at = (char *)p + f->offset;
  if (f->kind == PLAN_FK_BOOL) {
    *(bool *)at = v != 0;
  } else if (f->kind == PLAN_FK_ENUM) {
    int x = (int)v;
    memcpy(at, &x, sizeof x);
  } else if (f->size == sizeof(int32_t)) {
    int32_t x = (int32_t)v;
    memcpy(at, &x, sizeof x);
  } else {
    memcpy(at, &v, sizeof v);
  }
}

bool plan_field_equal(const plan *a, const plan *b, const plan_field *f) {
  switch (f->kind) {
  case PLAN_FK_ORDER: return memcmp((const char *)a + f->offset, (const char *)b + f->offset, f->size) == 0;
  case PLAN_FK_NAME:
    return strncmp((const char *)a + f->offset, (const char *)b + f->offset, PLAN_NAME_MAX) == 0;
  case PLAN_FK_LIST: {
    int64_t n = plan_field_int(a, f);
    if (n != plan_field_int(b, f)) return false;
    if (n <= 0 || n > PLAN_MAX_CHUNKS) return true;
    return memcmp((const char *)a + f->offset, (const char *)b + f->offset, (size_t)n * sizeof(int32_t)) == 0;
  }
  default: return plan_field_int(a, f) == plan_field_int(b, f);
  }
}

/* An integer in the field's range: plain decimal with an optional k/M/G suffix (util_parse_count: binary for a
 * field flagged PLAN_FF_BINARY_SUFFIX, else decimal), or 0 where the range admits it. */
static bool parse_int(const char *text, const plan_field *f, int64_t *out) {
  int64_t v = 0;
  if (strcmp(text, "0") == 0) v = 0;
  else if (!util_parse_count(text, (f->flags & PLAN_FF_BINARY_SUFFIX) != 0, &v)) return false;
  if (v < f->min || v > f->max) return false;
  *out = v;
  return true;
}

/* An enum value by name, or by one of the field's value aliases ("mxfp8=fp8"). */
static int parse_enum(const plan_field *f, const char *text) {
  int i = names_find(f->names, (size_t)f->n_names, text);
  if (i >= 0) return i;
  char alias[64], target[64];
  for (const char *q = f->value_aliases; q && *q;) {
    const char *eq = strchr(q, '='), *bar = strchr(q, '|');
    if (!eq) break;
    size_t tl = bar ? (size_t)(bar - eq - 1) : strlen(eq + 1);
    snprintf(alias, sizeof alias, "%.*s", (int)(eq - q), q);
    snprintf(target, sizeof target, "%.*s", (int)tl, eq + 1);
    if (strcmp(alias, text) == 0) return names_find(f->names, (size_t)f->n_names, target);
    q = bar ? bar + 1 : eq + 1 + tl;
  }
  return -1;
}

ap_status plan_field_parse(ap_ctx *ctx, const plan_field *f, const char *shown, const char *text, plan *p) {
  switch (f->kind) {
  case PLAN_FK_INT: {
    int64_t v = 0;
    if (!parse_int(text, f, &v)) {
      if (f->min > 0)
        return ctx_fail(ctx, AP_INVALID, "--%s: expected a positive integer (%s), got \"%s\"", shown, f->help, text);
      return ctx_fail(ctx, AP_INVALID, "--%s: expected an integer in [%lld, %lld] (%s), got \"%s\"", shown,
                      (long long)f->min, (long long)f->max, f->help, text);
    }
    plan_field_set_int(p, f, v);
    return AP_OK;
  }
  case PLAN_FK_BOOL:
    if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0) plan_field_set_int(p, f, 1);
    else if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0) plan_field_set_int(p, f, 0);
    else return ctx_fail(ctx, AP_INVALID, "--%s: expected 0 or 1, got \"%s\"", shown, text);
    return AP_OK;
  case PLAN_FK_ENUM: {
    int v = parse_enum(f, text);
    if (v < 0) {
      char list[256] = "";
      for (int i = 0; i < f->n_names; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", f->names[i]);
      return ctx_fail(ctx, AP_INVALID, "--%s: expected one of %s, got \"%s\"", shown, list, text);
    }
    plan_field_set_int(p, f, v);
    return AP_OK;
  }
  case PLAN_FK_ORDER: {
    plan_axis order[PLAN_N_ORDER];
    int n = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    unsigned seen = 0;
    for (char *tok = strtok_r(buf, ",-", &save); tok; tok = strtok_r(NULL, ",-", &save)) {
      if (n >= PLAN_N_ORDER || !plan_axis_from_name(tok, &order[n]) || order[n] > PLAN_AXIS_PP ||
          (seen & (1u << order[n])))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected a permutation of tp,cp,ep,dp,pp, got \"%s\"", shown, text);
      seen |= 1u << order[n++];
    }
    if (n != PLAN_N_ORDER)
      return ctx_fail(ctx, AP_INVALID, "--%s: expected a permutation of tp,cp,ep,dp,pp, got \"%s\"", shown, text);
    memcpy((char *)p + f->offset, order, sizeof order);
    return AP_OK;
  }
  case PLAN_FK_LIST: {
    int32_t vals[PLAN_MAX_CHUNKS];
    int32_t n = 0;
    const char *q = text;
    while (*q) {
      char *end = NULL;
      long v = strtol(q, &end, 10);
      if (end == q || v < f->min || v > f->max || n >= PLAN_MAX_CHUNKS || (*end && *end != ','))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected comma-separated layer counts, got \"%s\"", shown, text);
      vals[n++] = (int32_t)v;
      q = *end ? end + 1 : end;
    }
    memcpy((char *)p + f->offset, vals, (size_t)n * sizeof vals[0]);
    memcpy((char *)p + f->count_offset, &n, sizeof n);
    return AP_OK;
  }
  case PLAN_FK_NAME:
    if (strlen(text) >= PLAN_NAME_MAX)
      return ctx_fail(ctx, AP_INVALID, "--%s: longer than %d bytes", shown, PLAN_NAME_MAX - 1);
    memcpy((char *)p + f->offset, text, strlen(text) + 1);
    return AP_OK;
  }
  return ctx_fail(ctx, AP_INTERNAL, "--%s: field kind %d", shown, (int)f->kind);
}

void plan_field_format(const plan *p, const plan_field *f, char *out, size_t n) {
  if (!n) return;
  out[0] = '\0';
  const char *at = (const char *)p + f->offset;
  switch (f->kind) {
  case PLAN_FK_INT: snprintf(out, n, "%lld", (long long)plan_field_int(p, f)); return;
  case PLAN_FK_BOOL: snprintf(out, n, "%d", (int)plan_field_int(p, f)); return;
  case PLAN_FK_ENUM: {
    int64_t v = plan_field_int(p, f);
    snprintf(out, n, "%s", v >= 0 && v < f->n_names ? f->names[v] : "?");
    return;
  }
  case PLAN_FK_ORDER: {
    const plan_axis *o = (const plan_axis *)(const void *)at;
    for (int i = 0; i < PLAN_N_ORDER; i++) {
      size_t len = strlen(out);
      snprintf(out + len, n - len, "%s%s", i ? "," : "", plan_axis_name(o[i]));
    }
    return;
  }
  case PLAN_FK_LIST: {
    int64_t c = plan_field_int(p, f);
    const int32_t *v = (const int32_t *)(const void *)at;
    for (int64_t i = 0; i < c && i < PLAN_MAX_CHUNKS; i++) {
      size_t len = strlen(out);
      snprintf(out + len, n - len, "%s%d", i ? "," : "", (int)v[i]);
    }
    return;
  }
  case PLAN_FK_NAME: snprintf(out, n, "%.*s", PLAN_NAME_MAX - 1, at); return;
  }
}

/* ---- Defaults, equality and the op specs, driven by the table ---- */

/* Megatron's default order (parallel_state.py initialize_model_parallel: order="tp-cp-ep-dp-pp"). */
static const plan_axis default_order[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_EP, PLAN_AXIS_DP,
                                                      PLAN_AXIS_PP};

void plan_defaults(plan *p) {
  /* memset first, so that padding is zero too and plans can be hashed or compared byte by byte; lists start
   * empty, names "", no ops. */
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < AP_COUNT(table); i++) {
    const plan_field *f = &table[i];
    if (f->kind == PLAN_FK_INT || f->kind == PLAN_FK_BOOL || f->kind == PLAN_FK_ENUM) plan_field_set_int(p, f, f->def);
    else if (f->kind == PLAN_FK_ORDER) memcpy((char *)p + f->offset, default_order, sizeof default_order);
  }
}

bool plan_equal(const plan *a, const plan *b) { return plan_equal_except(a, b, 0); }

bool plan_equal_except(const plan *a, const plan *b, unsigned skip_mask) {
  /* The names last: the searches compare plans of one model and cluster, which differ in their degrees. */
  for (size_t i = 0; i < AP_COUNT(table); i++)
    if (table[i].kind != PLAN_FK_NAME && !((skip_mask >> table[i].id) & 1u) && !plan_field_equal(a, b, &table[i]))
      return false;
  for (size_t i = 0; i < AP_COUNT(table); i++)
    if (table[i].kind == PLAN_FK_NAME && !((skip_mask >> table[i].id) & 1u) && !plan_field_equal(a, b, &table[i]))
      return false;
  if (a->n_ops != b->n_ops) return false;
  return a->n_ops <= 0 || memcmp(a->ops, b->ops, sizeof a->ops[0] * (size_t)a->n_ops) == 0;
}

ap_status plan_set_ops(plan *p, const plan_op_spec *ops, int32_t n) {
  plan_op_spec *copy = NULL;
  if (n > 0) {
    copy = malloc(sizeof *copy * (size_t)n);
    if (!copy) {
      plan_free(p);
      return AP_NOMEM;
    }
    memcpy(copy, ops, sizeof *copy * (size_t)n);
  }
  free(p->ops);
  p->ops = copy;
  p->n_ops = n > 0 ? n : 0;
  return AP_OK;
}

ap_status plan_copy(plan *dst, const plan *src) {
  if (dst == src) return AP_OK;
  /* The plain fields in one memcpy: the whole cost of a copy in the search loops, where plans have no ops. */
  memcpy(dst, src, sizeof *dst);
  dst->ops = NULL;
  dst->n_ops = 0;
  return src->n_ops > 0 ? plan_set_ops(dst, src->ops, src->n_ops) : AP_OK;
}

void plan_free(plan *p) {
  if (!p) return;
  free(p->ops);
  p->ops = NULL;
  p->n_ops = 0;
}
