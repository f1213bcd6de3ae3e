/* The one-line plan summary (plan layer); see summary.h. Every field is written in one place, with its
 * spelling in each style side by side, so that the styles list the same facts in the same order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/summary.h"

static const char *mark(plan_chosen_fn chosen, const void *user, const char *field) {
  return chosen && chosen(user, field) ? "*" : "";
}

void plan_summary(const plan *p, int style, plan_chosen_fn chosen, const void *user, char *out, size_t n) {
  const bool line = (style & PLAN_SUMMARY_COMPACT) == 0;
#define M(field) mark(chosen, user, field)
  strbuf sb = {0};
  long long tp = (long long)p->tp, pp = (long long)p->pp, dp = (long long)p->dp;
  if (line) sb_printf(&sb, "tp %lld, pp %lld, dp %lld", tp, pp, dp);
  else sb_printf(&sb, "tp%lld%s pp%lld%s dp%lld%s", tp, M("tp"), pp, M("pp"), dp, M("dp"));
  if (p->cp > 1) {
    if (line) sb_printf(&sb, ", cp %lld", (long long)p->cp);
    else sb_printf(&sb, " cp%lld%s", (long long)p->cp, M("cp"));
  }
  if (line && (p->ep > 1 || (p->etp > 0 && p->etp != p->tp)))
    sb_printf(&sb, ", ep %lld etp %lld", (long long)p->ep, (long long)plan_etp(p));
  else if (!line && p->ep > 1)
    sb_printf(&sb, " ep%lld%s", (long long)p->ep, M("ep"));
  if (line) {
    plan d;
    plan_defaults(&d);
    if (memcmp(d.order, p->order, sizeof d.order) != 0) {
      sb_puts(&sb, " (order ");
      for (int i = 0; i < PLAN_N_ORDER; i++) sb_printf(&sb, "%s%s", i ? "-" : "", plan_axis_name(p->order[i]));
      sb_puts(&sb, ")");
    }
    sb_printf(&sb, " | mbs %lld x %lld | %s", (long long)p->micro_batch_size, (long long)p->n_micro_batches,
              plan_schedule_name(p->schedule));
    if (p->vpp > 1) sb_printf(&sb, " vpp %lld", (long long)p->vpp);
    if (p->n_stage_layers > 0) {
      sb_puts(&sb, " [");
      for (int32_t c = 0; c < p->n_stage_layers && c < 12; c++) sb_printf(&sb, "%s%d", c ? "," : "", (int)p->stage_layers[c]);
      sb_puts(&sb, p->n_stage_layers > 12 ? ",...]" : "]");
    }
  } else {
    sb_printf(&sb, " mbs%lld%s vpp%lld%s", (long long)p->micro_batch_size, M("micro_batch_size"), (long long)p->vpp,
              M("vpp"));
  }
  /* Shown whenever the plan says it (the JSON's sequence_parallel); plan_resolve turns it off at tp = 1. */
  if (line && p->sequence_parallel) sb_puts(&sb, " | sp");
  else if (!line) sb_printf(&sb, " sp%d%s", p->sequence_parallel ? 1 : 0, M("sequence_parallel"));
  bool full = p->recompute == PLAN_RECOMPUTE_FULL;
  if (line) {
    sb_printf(&sb, " | recompute %s", plan_recompute_name(p->recompute));
    if (full && p->n_chunk_recompute > 0) sb_puts(&sb, " (per chunk)");
    else if (full && p->recompute_layers > 0) sb_printf(&sb, " (%d layers per chunk)", (int)p->recompute_layers);
  } else {
    sb_printf(&sb, " rc=%s", plan_recompute_name(p->recompute));
    if (full && p->recompute_layers > 0) sb_printf(&sb, "/%d", (int)p->recompute_layers);
    sb_puts(&sb, M("recompute"));
  }
  if (line) sb_printf(&sb, " | ZeRO %d | %s", (int)p->zero_stage, plan_precision_name(p->precision));
  else sb_printf(&sb, " z%d%s", (int)p->zero_stage, M("zero_stage"));
  if (!line && p->precision != PLAN_PREC_BF16) sb_printf(&sb, " %s%s", plan_precision_name(p->precision), M("precision"));
  if (line && p->tp_comm_overlap && p->tp > 1) sb_puts(&sb, " | tp-comm-overlap");
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE || p->offload_param != PLAN_OFFLOAD_NONE)
    sb_printf(&sb, line ? " | offload optimizer %s, params %s" : " offload=%s/%s", plan_offload_name(p->offload_optimizer),
              plan_offload_name(p->offload_param));
  /* The fused loss is never a field a runs table states, so the compact form always marks it chosen. */
  if (p->fused_loss) sb_puts(&sb, line ? " | fused loss" : " fused-loss*");
  if (!line && (style & PLAN_SUMMARY_SCHEDULE))
    sb_printf(&sb, " %s vpp%lld", plan_schedule_name(p->schedule), (long long)p->vpp);
#undef M
  char *s = sb_take(&sb);
  snprintf(out, n, "%s", s ? s : "?");
  free(s);
}
