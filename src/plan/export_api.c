/* The public export API (plan layer): ap_export resolves and validates a plan against its model, then hands
 * it to one exporter from a table of formats. Also the helpers the exporters share: the sequence length, the
 * pipeline split and the one-line summary each output opens with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "plan/export.h"
#include "plan/plan_api.h"

/* ---- Shared helpers ---- */

int64_t export_seq_length(const plan *p, const graph *g) { return p->seq_length > 0 ? p->seq_length : g->default_seq; }

bool export_chunk_layers(const plan *p, const graph *g, int32_t *out) {
  plan_model_facts f;
  plan_model_facts_of(g, &f);
  return plan_chunk_layers(p, f.n_layers, out);
}

/* The axes of degree > 1 in order, innermost first, as "tp-dp-pp" ("" when none). */
static void order_text(const plan *p, const plan_axis *order, char *buf, size_t cap) {
  buf[0] = '\0';
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    if (plan_axis_size(p, order[i]) <= 1) continue;
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? "-" : "", plan_axis_name(order[i]));
  }
}

void export_order_note(const plan *p, const char *framework, strbuf *sb) {
  plan d;
  plan_defaults(&d);
  char mine[64], dflt[64];
  order_text(p, p->order, mine, sizeof mine);
  order_text(p, d.order, dflt, sizeof dflt);
  if (strcmp(mine, dflt) != 0)
    sb_printf(sb, "# note: %s numbers ranks %s (innermost first); the plan's order %s cannot be stated, so its groups "
                  "land on other links than planned\n",
              framework, dflt, mine);
}

void export_summary(const plan *p, const graph *g, strbuf *sb) {
  char name[PLAN_NAME_MAX];
  snprintf(name, sizeof name, "%.*s", PLAN_NAME_MAX - 1, p->model[0] ? p->model : g->name);
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
static ap_status export_json(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out) {
  (void)ctx;
  (void)g;
  plan_to_json(p, out);
  sb_puts(out, "\n");
  return AP_OK;
}

typedef ap_status (*export_fn)(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out);

/* One row per format (STYLE.md 8: tables, not switch chains). */
static const struct {
  const char *name;
  export_fn write;
} formats[] = {
    {"megatron", export_megatron},
    {"deepspeed", export_deepspeed},
    {"torchtitan", export_torchtitan},
    {"json", export_json},
};

static ap_status unknown_format(ap_ctx *ctx, const char *format) {
  const char *names[AP_COUNT(formats)];
  char list[128] = "";
  for (size_t i = 0; i < AP_COUNT(formats); i++) {
    names[i] = formats[i].name;
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", formats[i].name);
  }
  char sugg[128];
  util_suggest(format, names, AP_COUNT(formats), sugg, sizeof sugg);
  return ctx_fail(ctx, AP_INVALID, "unknown export format \"%.64s\" (expected one of: %s)%s%s%s", format, list,
                  *sugg ? "; did you mean " : "", sugg, *sugg ? "?" : "");
}

ap_status ap_export(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !ap || !out) return ctx_fail(ctx, AP_INVALID, "ap_export: ctx, plan and out must not be NULL");
  export_fn write = NULL;
  for (size_t i = 0; i < AP_COUNT(formats) && format; i++)
    if (strcmp(formats[i].name, format) == 0) write = formats[i].write;
  if (!write) return unknown_format(ctx, format ? format : "");

  /* Without a model, the one the plan was made for. */
  ap_model *owned = NULL;
  if (!model) {
    char name[PLAN_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", PLAN_NAME_MAX - 1, ap->p.model);
    if (!name[0])
      return ctx_fail(ctx, AP_INVALID, "plan: no model given (--model), and the plan's \"model\" field names none");
    ap_status st = ap_model_load(ctx, name, &owned);
    if (st) return st;
    model = owned;
  }
  const graph *g = model_graph(model);

  /* A plan with no cluster at hand occupies exactly its own mesh; resolving fills the batch fields the user
   * left to derive. */
  plan_resolve(ap, plan_n_devices(&ap->p));
  ap_status st = plan_validate(ctx, &ap->p, g, plan_n_devices(&ap->p), NULL);
  /* Per-chunk recompute counts (layer-wise DP) exist only in autopar's own format: the frameworks take one
   * count for every chunk, so a list with equal entries becomes that count and any other is refused. */
  plan p = ap->p;
  if (!st && p.n_chunk_recompute > 0 && strcmp(format, "json") != 0) {
    bool same = true;
    for (int32_t c = 1; c < p.n_chunk_recompute; c++) same &= p.chunk_recompute_layers[c] == p.chunk_recompute_layers[0];
    if (!same)
      st = ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: per-chunk recompute counts differ between pipeline chunks; %s takes one count for all "
                    "(export --format json keeps them)",
                    format, format);
    else {
      p.recompute_layers = p.chunk_recompute_layers[0];
      p.n_chunk_recompute = 0;
      if (p.recompute_layers == 0) p.recompute = PLAN_RECOMPUTE_NONE;
    }
  }
  strbuf sb = {0};
  if (!st) st = write(ctx, &p, g, &sb);
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
