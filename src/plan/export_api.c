/* The public export API (plan layer): ap_export resolves and validates a plan against its model, then hands
 * it to one exporter from a table of formats; ap_export_check asks the same format's "can this stack express
 * this plan" without writing anything. Also the helpers the exporters share: the sequence length, the
 * pipeline split, the rank order and the one-line summary each output opens with. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/hw.h"
#include "model/model.h"
#include "plan/export.h"
#include "plan/plan_api.h"
#include "plan/stack.h"

/* ---- Shared helpers ---- */

int64_t export_seq_length(const plan *p, const graph *g) { return p->seq_length > 0 ? p->seq_length : g->default_seq; }

bool export_chunk_layers(const plan *p, const graph *g, int32_t *out) {
  plan_model_facts f;
  plan_model_facts_of(g, &f);
  return plan_chunk_layers(p, f.n_layers, out);
}

void export_order_text(const plan *p, const plan_axis *order, char *buf, size_t cap) {
  buf[0] = '\0';
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    if (plan_axis_size(p, order[i]) <= 1) continue;
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? "-" : "", plan_axis_name(order[i]));
  }
}

bool export_order_is(const plan *p, const char *text) {
  plan_axis order[PLAN_N_ORDER];
  char word[8];
  const char *c = text;
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    size_t n = strcspn(c, "-");
    if (n == 0 || n >= sizeof word) return false;
    memcpy(word, c, n);
    word[n] = '\0';
    c += n + (c[n] == '-');
    bool found = false;
    for (int a = 0; a < PLAN_N_ORDER && !found; a++)
      if (strcmp(plan_axis_name((plan_axis)a), word) == 0) {
        order[i] = (plan_axis)a;
        found = true;
      }
    if (!found) return false;
  }
  char mine[64], want[64];
  export_order_text(p, p->order, mine, sizeof mine);
  export_order_text(p, order, want, sizeof want);
  return strcmp(mine, want) == 0;
}

void export_summary(const plan *p, const graph *g, strbuf *sb) {
  char name[PLAN_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", PLAN_NAME_MAX - 1, g->name);
  sb_printf(sb, "%s: dp %lld x tp %lld x pp %lld x cp %lld", name, (long long)p->dp, (long long)p->tp,
            (long long)p->pp, (long long)p->cp);
  if (p->ep > 1) sb_printf(sb, ", ep %lld etp %lld", (long long)p->ep, (long long)plan_etp(p));
  sb_printf(sb, ", %s", plan_schedule_name(p->schedule));
  if (p->vpp > 1) sb_printf(sb, " vpp %lld", (long long)p->vpp);
  if (p->pp > 1) {
    int32_t layers[PLAN_MAX_CHUNKS];
    if (export_chunk_layers(p, g, layers)) {
      sb_puts(sb, " [");
      for (int64_t c = 0; c < plan_n_chunks(p); c++) sb_printf(sb, "%s%d", c ? "," : "", (int)layers[c]);
      sb_puts(sb, "]");
    }
  }
  sb_printf(sb, ", mbs %lld x %lld micro-batches, gbs %lld, seq %lld", (long long)p->micro_batch_size,
            (long long)p->n_micro_batches, (long long)p->global_batch_size, (long long)export_seq_length(p, g));
  if (p->sequence_parallel && p->tp > 1) sb_puts(sb, ", sp");
  sb_printf(sb, ", recompute %s", plan_recompute_name(p->recompute));
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0) sb_printf(sb, " (%d per chunk)", (int)p->recompute_layers);
  sb_printf(sb, ", zero %d, %s", (int)p->zero_stage, plan_precision_name(p->precision));
  if (p->fused_loss) sb_puts(sb, ", fused loss");
  if (p->cluster[0]) sb_printf(sb, ", for %.*s", PLAN_NAME_MAX - 1, p->cluster);
}

/* ---- Formats ---- */

/* autopar's own form (docs/plan-format.md), which `estimate --plan` and `simulate --plan` read back. */
static ap_status json_can_express(ap_ctx *ctx, const plan *p, const graph *g) {
  (void)ctx;
  (void)p;
  (void)g;
  return AP_OK;
}

static ap_status export_json(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out) {
  (void)ctx;
  (void)g;
  (void)l;
  plan_to_json(p, out);
  sb_puts(out, "\n");
  return AP_OK;
}

/* Whether the framework builds the model at all (whatever the plan): no re-planning helps where it does not. */
static ap_status megatron_model_ok(ap_ctx *ctx, const graph *g) {
  mshape sh;
  if (!megatron_shape_of(g, &sh)) return ctx_fail(ctx, AP_UNSUPPORTED, "not a transformer Megatron-LM builds");
  return megatron_model_check(ctx, &sh, g);
}
static ap_status tt_model_ok(ap_ctx *ctx, const graph *g) {
  const tt_flavor *t;
  return tt_model_of(ctx, "torchtitan", g, TT_CURRENT, &t);
}
static ap_status tt_toml_model_ok(ap_ctx *ctx, const graph *g) {
  const tt_flavor *t;
  return tt_model_of(ctx, "torchtitan-toml", g, TT_TOML, &t);
}

/* One row per format (STYLE.md 8: tables, not switch chains). */
static const struct {
  const char *name;
  const char *summary; /* what the format writes, for the CLI's help (ap_export_format) */
  export_check_fn check;
  export_write_fn write;
  ap_status (*model_ok)(ap_ctx *ctx, const graph *g); /* NULL: the framework takes any model of the plan */
} formats[] = {
    {"megatron", "a torchrun command for Megatron-LM", megatron_can_express, export_megatron, megatron_model_ok},
    {"deepspeed", "a DeepSpeed JSON config", deepspeed_can_express, export_deepspeed, NULL},
    {"torchtitan", "a Python config for torchtitan's dataclass registry", torchtitan_can_express, export_torchtitan,
     tt_model_ok},
    {"torchtitan-toml", "a TOML job config for torchtitan v0.2.x", torchtitan_toml_can_express,
     export_torchtitan_toml, tt_toml_model_ok},
    {"json", "autopar's plan format, docs/plan-format.md", json_can_express, export_json, NULL},
};

const char *ap_export_format(size_t i, const char **summary) {
  if (summary) *summary = i < AP_COUNT(formats) ? formats[i].summary : NULL;
  return i < AP_COUNT(formats) ? formats[i].name : NULL;
}

static ap_status unknown_format(ap_ctx *ctx, const char *format) {
  const char *names[AP_COUNT(formats)];
  char list[160] = "";
  for (size_t i = 0; i < AP_COUNT(formats); i++) {
    names[i] = formats[i].name;
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", formats[i].name);
  }
  char sugg[128];
  util_suggest(format, names, AP_COUNT(formats), sugg, sizeof sugg);
  return ctx_fail(ctx, AP_INVALID, "unknown export format \"%.64s\" (expected one of: %s)%s%s%s", format, list,
                  *sugg ? "; did you mean " : "", sugg, *sugg ? "?" : "");
}

/* Whether a word can go to the shell as it is (no quoting needed). */
static bool shell_plain(const char *w) {
  for (const char *c = w; *c; c++)
    if (!(isalnum((unsigned char)*c) || strchr("._/-:+=,@%", *c))) return false;
  return *w != '\0';
}

static void shell_word(strbuf *sb, const char *w) {
  if (shell_plain(w)) {
    sb_puts(sb, w);
    return;
  }
  sb_puts(sb, "'");
  for (const char *c = w; *c; c++) {
    if (*c == '\'') sb_puts(sb, "'\\''");
    else sb_printf(sb, "%c", *c);
  }
  sb_puts(sb, "'");
}

/* The command that plans for the format's stack from what the plan records: its model (the preset or the path
 * `plan` wrote; else the model at hand), its cluster (CLUSTER where it names none), its batch and sequence. */
static void replan_command(const plan *p, const graph *g, const ap_model *model, const char *format, plan_stack stk,
                           char *out, size_t n) {
  strbuf sb = {0};
  char name[PLAN_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", PLAN_NAME_MAX - 1, p->model[0] ? p->model : model ? ap_model_spec(model) : g->name);
  sb_puts(&sb, "autopar plan --model ");
  shell_word(&sb, name);
  sb_puts(&sb, " --cluster ");
  char cl[PLAN_NAME_MAX];
  snprintf(cl, sizeof cl, "%.*s", PLAN_NAME_MAX - 1, p->cluster);
  if (cl[0]) shell_word(&sb, cl);
  else sb_printf(&sb, "CLUSTER_OF_%lld_DEVICES", (long long)plan_n_devices(p));
  sb_printf(&sb, " --gbs %lld --seq %lld --stack %s --export %s", (long long)p->global_batch_size,
            (long long)export_seq_length(p, g), plan_stack_name(stk), format);
  snprintf(out, n, "%s", sb.buf && !sb.oom ? sb.buf : "autopar plan ... --stack NAME");
  sb_free(&sb);
}

/* Nodes and processes per node for the plan's world size, from its recorded cluster when that loads (the
 * cluster's first node group), else 8 per node where that divides the world, else one node; and the stacks
 * (export_launch). */
static export_launch launch_of(const plan *p, const graph *g, const ap_model *model, const char *format) {
  int64_t world = plan_n_devices(p);
  export_launch l = {1, world, true, NULL, NULL, ""};
  plan_stack fs = plan_stack_of_export(format);
  if (fs != PLAN_STACK_COUNT_) {
    l.format_stack = plan_stack_name(fs);
    replan_command(p, g, model, format, fs, l.replan, sizeof l.replan);
    plan_model_facts f;
    plan_model_facts_of(g, &f);
    plan_stack ps = p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(f.has_layers) : p->stack;
    if (ps != fs) l.planned_for = plan_stack_name(ps);
  }
  ap_cluster *c = NULL;
  ap_ctx scratch = {0};
  char spec[PLAN_NAME_MAX];
  snprintf(spec, sizeof spec, "%.*s", PLAN_NAME_MAX - 1, p->cluster);
  if (spec[0] && ap_cluster_load(&scratch, spec, &c) == AP_OK) {
    const hw_cluster *hc = hw_cluster_of(c);
    int64_t per = hc->n_groups > 0 ? hc->groups[0].devices_per_node : 0;
    if (per > 0 && world % per == 0) l.n_nodes = world / per, l.per_node = per, l.assumed = false;
    else if (per > 0 && world < per) l.n_nodes = 1, l.per_node = world, l.assumed = false;
  }
  ap_cluster_free(c);
  ctx_clear(&scratch);
  if (l.assumed && world % 8 == 0) l.n_nodes = world / 8, l.per_node = 8;
  return l;
}

void export_launch_note(const plan *p, const export_launch *l, strbuf *sb) {
  if (l->planned_for)
    sb_printf(sb, "# note: the plan was costed for %s, not %s: %s runs it at other figures; to plan for %s:\n#   %s\n",
              l->planned_for, l->format_stack, l->format_stack, l->format_stack, l->replan);
  if (!l->assumed) return;
  if (p->cluster[0])
    sb_printf(sb, "# note: the plan's cluster \"%.*s\" did not load; %lld processes per node assumed\n",
              PLAN_NAME_MAX - 1, p->cluster, (long long)l->per_node);
  else
    sb_printf(sb, "# note: the plan names no cluster; %lld processes per node assumed\n", (long long)l->per_node);
}

void export_torchrun(const export_launch *l, const char *endpoint_host, strbuf *sb) {
  if (l->n_nodes <= 1) {
    sb_printf(sb, "torchrun --standalone --nnodes 1 --nproc-per-node %lld", (long long)l->per_node);
    return;
  }
  sb_printf(sb, "torchrun --nnodes %lld --nproc-per-node %lld --rdzv-id autopar --rdzv-backend c10d --rdzv-endpoint %s:%d",
            (long long)l->n_nodes, (long long)l->per_node, endpoint_host, EXPORT_RDZV_PORT);
}

/* The first host of the SLURM allocation, as the shell that runs srun expands it. */
#define SLURM_FIRST_HOST "$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)"

void export_launch_comment(const export_launch *l, const char *run, const char *script, strbuf *sb) {
  if (l->n_nodes <= 1) {
    sb_puts(sb, "# launch (one node):  ");
    if (script) sb_printf(sb, "bash %s\n", script);
    else {
      export_torchrun(l, "", sb);
      sb_printf(sb, "%s\n", run);
    }
    return;
  }
  sb_printf(sb, "# launch: %lld nodes x %lld processes, the same command on every node; torch's c10d rendezvous on the first "
                "node, port %d, numbers the nodes (no NODE_RANK or MASTER_ADDR to set by hand):\n",
            (long long)l->n_nodes, (long long)l->per_node, EXPORT_RDZV_PORT);
  sb_printf(sb, "#   SLURM, one task per node:  srun --nodes %lld --ntasks-per-node 1 ", (long long)l->n_nodes);
  if (script) sb_printf(sb, "env RDZV_HOST=%s bash %s\n", SLURM_FIRST_HOST, script);
  else {
    export_torchrun(l, SLURM_FIRST_HOST, sb);
    sb_printf(sb, "%s\n", run);
  }
  sb_printf(sb, "#   by hand, on each of the %lld nodes:  ", (long long)l->n_nodes);
  if (script) sb_printf(sb, "RDZV_HOST=<address of the first node> bash %s\n", script);
  else {
    export_torchrun(l, "<address of the first node>", sb);
    sb_printf(sb, "%s\n", run);
  }
}

/* Resolves the format, the model and the plan: *g is the model's graph (*owned the model loaded for it),
 * *p the validated plan with equal per-chunk recompute counts collapsed into one. */
static ap_status prepare(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format, size_t *fmt,
                         ap_model **owned, const graph **g, plan *p) {
  *owned = NULL;
  size_t i = 0;
  while (i < AP_COUNT(formats) && !(format && strcmp(formats[i].name, format) == 0)) i++;
  if (i == AP_COUNT(formats)) return unknown_format(ctx, format ? format : "");
  *fmt = i;
  /* Without a model, the one the plan was made for: the preset it names or the config path it records. */
  if (!model) {
    char name[PLAN_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", PLAN_NAME_MAX - 1, ap->p.model);
    if (!name[0])
      return ctx_fail(ctx, AP_INVALID, "plan: no model given (--model), and the plan's \"model\" field names none");
    ap_status st = ap_model_load(ctx, name, owned);
    if (st) return st;
    model = *owned;
  }
  *g = model_graph(model);
  /* A plan with no cluster at hand occupies exactly its own mesh; resolving fills the batch fields the user
   * left to derive. */
  plan_resolve(ap, plan_n_devices(&ap->p));
  ap_status st = plan_validate(ctx, &ap->p, *g, plan_n_devices(&ap->p), NULL);
  /* Per-chunk recompute counts (layer-wise DP) exist only in autopar's own format: the frameworks take one
   * count for every chunk, so a list with equal entries becomes that count and any other is refused. */
  *p = ap->p;
  if (!st && p->n_chunk_recompute > 0 && strcmp(format, "json") != 0) {
    bool same = true;
    for (int32_t c = 1; c < p->n_chunk_recompute; c++) same &= p->chunk_recompute_layers[c] == p->chunk_recompute_layers[0];
    if (!same)
      st = ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: per-chunk recompute counts differ between pipeline chunks; %s takes one count for all "
                    "(export --format json keeps them)",
                    format, format);
    else {
      p->recompute_layers = p->chunk_recompute_layers[0];
      p->n_chunk_recompute = 0;
      if (p->recompute_layers == 0) p->recompute = PLAN_RECOMPUTE_NONE;
    }
  }
  if (st) {
    ap_model_free(*owned);
    *owned = NULL;
  }
  return st;
}

/* A refusal of a plan (not of the model: format fmt builds g) names the command that plans for the format's
 * stack (export_launch.replan) after its reason. */
static ap_status with_replan(ap_ctx *ctx, ap_status st, const export_launch *l, size_t fmt, const graph *g) {
  if (st != AP_UNSUPPORTED || !l->format_stack) return st;
  if (formats[fmt].model_ok) {
    ap_ctx scratch = ctx_child(ctx);
    bool builds = formats[fmt].model_ok(&scratch, g) == AP_OK;
    ctx_clear(&scratch);
    if (!builds) return st;
  }
  char why[sizeof ctx->error];
  snprintf(why, sizeof why, "%s", ctx->error);
  return ctx_fail(ctx, st, "%s; for a plan %s runs: %s", why, l->format_stack, l->replan);
}

ap_status export_check_plan(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format, bool replan) {
  size_t fmt;
  ap_model *owned;
  const graph *g;
  plan p;
  ap_status st = prepare(ctx, model, ap, format, &fmt, &owned, &g, &p);
  if (!st) st = formats[fmt].check(ctx, &p, g);
  if (st && replan) {
    export_launch l = launch_of(&p, g, model ? model : owned, format);
    st = with_replan(ctx, st, &l, fmt, g);
  }
  ap_model_free(owned);
  return plan_blame_file(ctx, ap, st);
}

ap_status ap_export_check(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format) {
  API_ENTER(ctx);
  if (!ctx || !ap) return ctx_fail(ctx, AP_INVALID, "ap_export_check: ctx and plan must not be NULL");
  if (plan_refuse_doc2(ctx, ap, "ap_export_check")) return AP_INVALID;
  return export_check_plan(ctx, model, ap, format, true);
}

ap_status ap_export(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !ap || !out) return ctx_fail(ctx, AP_INVALID, "ap_export: ctx, plan and out must not be NULL");
  if (plan_refuse_doc2(ctx, ap, "ap_export")) return AP_INVALID;
  size_t fmt;
  ap_model *owned;
  const graph *g;
  plan p;
  ap_status st = prepare(ctx, model, ap, format, &fmt, &owned, &g, &p);
  if (st) return plan_blame_file(ctx, ap, st);
  export_launch l = launch_of(&p, g, model ? model : owned, format);
  strbuf sb = {0};
  st = with_replan(ctx, formats[fmt].write(ctx, &p, g, &l, &sb), &l, fmt, g);
  ap_model_free(owned);
  if (st) {
    sb_free(&sb);
    return plan_blame_file(ctx, ap, st);
  }
  if (mem_failed()) { /* a builder whose buffer failed leaves parts out (core/alloc.h) */
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory writing the export");
  }
  *out = sb_take(&sb);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}
