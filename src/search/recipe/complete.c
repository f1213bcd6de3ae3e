/* Plan completion (search layer): the unstated fields of a partial plan chosen by enumeration under the cost
 * model. See complete.h for the candidates of each field and the choice rule.
 *
 * The enumeration is a nest of loops, outermost first: tp, pp (dp follows), ep, micro-batch size, vpp (with
 * the schedule), ZeRO stage, recompute. Each list starts with the usual choice, so that ties, which go to
 * the first candidate, favour the plan a team would write down first. Candidates that plan_validate rejects
 * cost a few hundred nanoseconds and are not counted against max_evaluations; the first rejection's message
 * is kept for the error when nothing is valid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/recipe/cands.h"
#include "plan/stack.h"
#include "search/recipe/complete.h"

complete_options complete_options_defaults(void) { return (complete_options){.max_evaluations = 16384}; }

enum {
  /* TUNING: candidates looked at (valid or not) per evaluation allowed, so that a space made mostly of invalid
   * plans still ends quickly; validation is about a hundred times cheaper than evaluation. */
  CONSIDER_PER_EVAL = 64,
};


/* One completion in progress. */
typedef struct {
  const cost_env *env;
  const graph *g;
  plan_model_facts facts;
  int64_t n_devices;
  unsigned stated;
  search_space space; /* the problem: the partial plan as the template, the stated fields as the fixed ones */
  complete_options opt;
  complete_stats stats;
  int64_t n_considered;
  bool stop;          /* a limit was reached or a hard error happened */
  ap_status hard;     /* a failure other than an invalid candidate (out of memory …) */
  ap_ctx scratch;     /* receives the messages of rejected candidates */
  char first_error[sizeof ((ap_ctx *)0)->error];
  bool split_given; /* the partial plan lists its own stage_layers */
  bool etp_stated;  /* stated & PLAN_F(ETP): expert tensor parallelism is not chosen (etp_candidates) */
  bool loss_stated; /* stated & PLAN_F(FUSED_LOSS): the loss is the partial plan's, else the stack's default */
  /* Progress and cancellation through the driver's ticker (space.h): the share of the tp·pp meshes done, and
   * whether the callback asked to stop (then the completion ends with AP_CANCELLED). */
  search_ticker ticker;
  double fraction;
  bool have_best;
  plan *best;
  cost_result *best_cost;
  cost_result cur;
} search;

static bool is_stated(const search *s, plan_field_id bit) { return search_space_fixes(&s->space, bit); }

/* True when candidate a (fits_a, tps_a, mem_a) beats the current best. Among plans that fit: more tokens per
 * second; a plan that fits beats one that does not; among plans that do not fit: less peak memory, then more
 * tokens per second. Differences below one part in 10^9 are ties, which keep the earlier candidate. */
static bool better(const cost_result *a, const cost_result *b) {
  const double eps = 1e-9;
  if (a->fits != b->fits) return a->fits;
  if (a->fits) return a->tokens_per_s_per_device > b->tokens_per_s_per_device * (1 + eps);
  if (a->peak_mem_bytes < b->peak_mem_bytes * (1 - eps)) return true;
  if (a->peak_mem_bytes > b->peak_mem_bytes * (1 + eps)) return false;
  return a->tokens_per_s_per_device > b->tokens_per_s_per_device * (1 + eps);
}

/* Evaluates one candidate. Returns 1 when it is valid and fits, 0 when valid but too big, -1 when invalid or
 * when the search must stop. */
static int evaluate(search *s, const plan *p) {
  if (s->stop) return -1;
  if (s->ticker.ctx && s->ticker.ctx->progress_fn && search_now_s() >= s->ticker.next_s) {
    char what[96];
    snprintf(what, sizeof what, "completion: %lld plans evaluated", (long long)s->stats.n_evaluated);
    if (search_ticker_tick(&s->ticker, search_now_s(), s->fraction, what)) {
      s->stop = true;
      return -1;
    }
  }
  if (++s->n_considered > s->opt.max_evaluations * CONSIDER_PER_EVAL) {
    s->stats.truncated = true;
    s->stop = true;
    return -1;
  }
  ctx_clear(&s->scratch);
  if (plan_validate(&s->scratch, p, s->g, s->n_devices, "plan")) {
    if (!s->first_error[0]) snprintf(s->first_error, sizeof s->first_error, "%s", s->scratch.error);
    return -1;
  }
  char why[256]; /* only what the plan's stack runs (plan/stack.h) */
  if (!plan_stack_runs(p->stack, p, why, sizeof why)) {
    if (!s->first_error[0]) snprintf(s->first_error, sizeof s->first_error, "plan: %s", why);
    return -1;
  }
  if (s->stats.n_evaluated >= s->opt.max_evaluations) {
    s->stats.truncated = true;
    s->stop = true;
    return -1;
  }
  s->stats.n_evaluated++;
  ap_status st = cost_estimate(&s->scratch, s->env, p, &s->cur);
  if (st == AP_INVALID) {
    if (!s->first_error[0]) snprintf(s->first_error, sizeof s->first_error, "%s", s->scratch.error);
    return -1;
  }
  if (st) {
    s->hard = st;
    s->stop = true;
    snprintf(s->first_error, sizeof s->first_error, "%s", s->scratch.error);
    return -1;
  }
  if (!isfinite(s->cur.tokens_per_s_per_device) || !isfinite(s->cur.peak_mem_bytes)) return -1;
  s->stats.n_valid++;
  if (s->cur.fits) s->stats.n_fit++;
  if (!s->have_best || better(&s->cur, s->best_cost)) {
    (void)plan_copy(s->best, p); /* candidates are transformer plans without ops: the copy cannot fail */
    memcpy(s->best_cost, &s->cur, sizeof s->cur);
    s->have_best = true;
  }
  return s->cur.fits ? 1 : 0;
}

/* Full recompute chosen by the completion: the fewest layers per chunk that fit (Megatron's --recompute-method
 * block --recompute-num-layers k), found by bisection since memory falls and time grows with k. On entry p
 * recomputes every layer (k = 0), which fits: it did, or a lighter granularity did, and full recompute keeps
 * less. p is left so. Every candidate goes through evaluate, which keeps the best. */
static void fewest_full_layers(search *s, plan *p) {
  int32_t layers[PLAN_MAX_CHUNKS], most = 0;
  if (!plan_chunk_layers(p, s->facts.n_layers, layers)) return;
  for (int64_t c = 0; c < plan_n_chunks(p); c++) most = layers[c] > most ? layers[c] : most;
  int32_t lo = 1, hi = most; /* k = most recomputes every layer: it fits */
  while (lo < hi && !s->stop) {
    int32_t mid = lo + (hi - lo) / 2;
    p->recompute_layers = mid;
    if (evaluate(s, p) == 1) hi = mid;
    else lo = mid + 1;
  }
  p->recompute_layers = 0;
}

/* The innermost loops: ZeRO stage, then recompute. Both are memory savers, and a memory saver never makes an
 * iteration faster: recompute adds compute, a higher ZeRO stage adds communication (stage 0 is tried last,
 * since stage 1 needs no more time and less memory). So the recompute loop stops at the first granularity
 * that fits (then also trying full recompute of the fewest layers, which a lighter granularity on every layer
 * need not beat), and once a stage fits without recompute no later stage can win. The completion offers the
 * granularities every framework runs: per-op checkpointing (torchtitan only) is taken when stated. */
static void enum_memory(search *s, plan *p) {
  static const int32_t zero_order[] = {1, 2, 3, 0};
  static const plan_recompute rc_order[] = {PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL};
  int nz = is_stated(s, PLAN_F_ZERO_STAGE) ? 1 : (int)AP_COUNT(zero_order);
  int nr = is_stated(s, PLAN_F_RECOMPUTE) ? 1 : (int)AP_COUNT(rc_order);
  for (int zi = 0; zi < nz && !s->stop; zi++) {
    if (!is_stated(s, PLAN_F_ZERO_STAGE)) p->zero_stage = zero_order[zi];
    bool fit_first = false;
    for (int ri = 0; ri < nr && !s->stop; ri++) {
      if (!is_stated(s, PLAN_F_RECOMPUTE)) {
        p->recompute = rc_order[ri];
        p->recompute_layers = 0;
      }
      if (evaluate(s, p) == 1) {
        fit_first = ri == 0;
        /* Recomputing only some layers fully can beat a lighter granularity on every layer: once anything
         * but none fits, so does full recompute of every layer, and the fewest layers that fit are tried. */
        if (ri > 0 && !is_stated(s, PLAN_F_RECOMPUTE)) {
          p->recompute = PLAN_RECOMPUTE_FULL;
          fewest_full_layers(s, p);
        }
        break;
      }
    }
    if (fit_first) break;
  }
}

/* The split of the layers into pp·vpp chunks, unless the partial plan gave one: the default split
 * (plan_split_default: even, or Megatron's embedding and loss accounting when there are one or two chunks more
 * than layers, --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split), stated in the
 * plan when it is the latter. */
static void set_split(search *s, plan *p) {
  if (s->split_given) return;
  if (s->facts.has_layers) plan_state_split(p, s->facts.n_layers);
  else p->n_stage_layers = 0;
}

/* The mesh is set (tp, pp, dp, cp, ep): micro-batch size, then virtual stages and the schedule. */
static void enum_batch(search *s, plan *p) {
  cands mbs = {.n = 0};
  if (is_stated(s, PLAN_F_MICRO_BATCH_SIZE)) {
    cands_add(&mbs, p->micro_batch_size);
  } else {
    if (p->global_batch_size % p->dp != 0) {
      cands_add(&mbs, 1); /* invalid whatever the micro-batch; validation names the reason */
    } else {
      int64_t per_dp = p->global_batch_size / p->dp;
      static const int64_t sizes[] = {1, 2, 4, 8};
      for (size_t i = 0; i < AP_COUNT(sizes); i++)
        if (per_dp % sizes[i] == 0) cands_add(&mbs, sizes[i]);
    }
  }
  for (int mi = 0; mi < mbs.n && !s->stop; mi++) {
    p->micro_batch_size = mbs.v[mi];
    int64_t per = p->micro_batch_size * p->dp;
    p->n_micro_batches = per > 0 && p->global_batch_size / per >= 1 ? p->global_batch_size / per : 1;
    cands vpp = {.n = 0};
    if (is_stated(s, PLAN_F_VPP)) {
      cands_add(&vpp, p->vpp);
    } else {
      cands_add(&vpp, 1);
      /* Megatron's interleaving: layers split evenly into pp·vpp chunks, micro-batches a multiple of pp. */
      int64_t L = s->facts.n_layers;
      for (int64_t v = 2; v <= 8 && p->pp > 1; v++)
        if ((L % (p->pp * v) == 0 || (L + 2) % (p->pp * v) == 0) && p->n_micro_batches % p->pp == 0 &&
            p->pp * v <= PLAN_MAX_CHUNKS)
          cands_add(&vpp, v);
    }
    for (int vi = 0; vi < vpp.n && !s->stop; vi++) {
      p->vpp = vpp.v[vi];
      if (!is_stated(s, PLAN_F_SCHEDULE)) p->schedule = p->vpp > 1 ? PLAN_SCHED_INTERLEAVED_1F1B : PLAN_SCHED_1F1B;
      set_split(s, p);
      enum_memory(s, p);
    }
  }
}

/* The expert-tensor-parallel degrees to try with ep experts' groups (plan.h: etp 0 means tp): the partial
 * plan's when stated or when there is no choice (a dense model, tp = 1); else the stack's default first, so
 * that a tie keeps it, then, with ep > 1, the other of {tp, 1}. Megatron-Core defaults
 * expert_tensor_parallel_size to tensor_model_parallel_size (transformer_config.py), Megatron-Bridge's MoE
 * recipes set it to 1 with expert parallelism (issue 10's reading; commit not pinned), and Megatron asserts 1 for
 * MoE with linear biases; plan/stack.h's etp_default holds each stack's. */
static int etp_candidates(const search *s, const plan *p, int64_t ep, int64_t *out) {
  if (s->etp_stated || s->facts.n_experts <= 0 || p->tp <= 1) {
    out[0] = p->etp;
    return 1;
  }
  plan_stack st = p->stack != PLAN_STACK_DEFAULT ? p->stack : plan_stack_default(s->facts.has_layers);
  const plan_stack_info *si = plan_stack_get(st);
  bool one_first = si && si->etp_default == 1;
  out[0] = one_first ? 1 : 0;
  out[1] = one_first ? 0 : 1;
  return ep > 1 ? 2 : 1;
}

/* tp, pp, cp and dp are set: expert parallelism (ep, then etp), sequence parallelism, then the rest. */
static void enum_experts(search *s, plan *p) {
  if (!is_stated(s, PLAN_F_SEQUENCE_PARALLEL)) p->sequence_parallel = p->tp > 1;
  /* TP communication overlap (Megatron --tp-comm-overlap) needs sequence parallelism and never makes an
   * iteration slower; a tuned team turns it on wherever it applies (Megatron-Bridge's performance recipes do). */
  p->tp_comm_overlap = p->sequence_parallel && p->tp > 1;
  const int64_t etp0 = p->etp, room = p->tp * p->cp * p->dp;
  cands ep = {.n = 0};
  if (is_stated(s, PLAN_F_EP) || s->facts.n_experts <= 0) {
    cands_add(&ep, is_stated(s, PLAN_F_EP) ? p->ep : 1);
  } else {
    /* Expert parallelism borrows its ranks from tp·cp·dp (plan.h): etp·ep must divide it (checked below). */
    for (int64_t e = 1; e <= s->facts.n_experts && ep.n < CANDS_MAX; e++)
      if (s->facts.n_experts % e == 0 && room % e == 0) cands_add(&ep, e);
  }
  for (int ei = 0; ei < ep.n && !s->stop; ei++) {
    p->ep = ep.v[ei];
    p->etp = etp0;
    int64_t etps[2];
    int n_etp = etp_candidates(s, p, p->ep, etps);
    for (int xi = 0; xi < n_etp && !s->stop; xi++) {
      p->etp = etps[xi];
      /* A degree with no room is skipped unless it is the only one (validation then names the reason). */
      if (n_etp > 1 && room % (plan_etp(p) * p->ep) != 0) continue;
      if (n_etp == 1 && !is_stated(s, PLAN_F_EP) && s->facts.n_experts > 0 && room % (plan_etp(p) * p->ep) != 0)
        continue;
      enum_batch(s, p);
    }
  }
  p->etp = etp0;
}

static void enum_mesh(search *s, plan *p) {
  const int64_t n = s->n_devices;
  bool st_tp = is_stated(s, PLAN_F_TP), st_pp = is_stated(s, PLAN_F_PP),
       st_dp = is_stated(s, PLAN_F_DP), st_cp = is_stated(s, PLAN_F_CP);
  const int64_t stated_dp = p->dp;
  /* cp: stated, or whatever tp·pp·dp leave over when all three are stated, or 1. */
  if (!st_cp) {
    p->cp = 1;
    if (st_tp && st_pp && st_dp) {
      int64_t rest = p->tp * p->pp * p->dp;
      if (rest > 0 && n % rest == 0) p->cp = n / rest;
    }
  }
  cands tp = {.n = 0};
  if (st_tp) {
    cands_add(&tp, p->tp);
  } else if (st_pp && st_dp) {
    int64_t rest = p->pp * p->dp * p->cp;
    cands_add(&tp, rest > 0 && n % rest == 0 ? n / rest : 1);
  } else {
    int64_t dom = hw_cluster_fast_domain(cost_env_cluster(s->env));
    static const int64_t degrees[] = {1, 2, 4, 8};
    for (size_t i = 0; i < AP_COUNT(degrees); i++)
      if (degrees[i] <= dom && n % (degrees[i] * p->cp) == 0) cands_add(&tp, degrees[i]);
    if (tp.n == 0) cands_add(&tp, 1);
  }
  for (int ti = 0; ti < tp.n && !s->stop; ti++) {
    p->tp = tp.v[ti];
    int64_t tc = p->tp * p->cp;
    cands pp = {.n = 0};
    if (st_pp) {
      cands_add(&pp, p->pp);
    } else if (st_dp) {
      int64_t rest = tc * stated_dp;
      cands_add(&pp, rest > 0 && n % rest == 0 ? n / rest : 1);
    } else if (n % tc == 0) {
      int64_t room = n / tc, most = s->facts.n_layers > 0 ? s->facts.n_layers : 1;
      for (int64_t d = 1; d <= room && d <= most && d <= PLAN_MAX_CHUNKS; d++)
        if (room % d == 0) cands_add(&pp, d);
    } else {
      cands_add(&pp, 1);
    }
    for (int pi = 0; pi < pp.n && !s->stop; pi++) {
      s->fraction = ((double)ti + (double)pi / (double)pp.n) / (double)tp.n;
      p->pp = pp.v[pi];
      int64_t tpc = tc * p->pp;
      if (!st_dp) p->dp = tpc > 0 && n % tpc == 0 ? n / tpc : 1;
      else p->dp = stated_dp;
      enum_experts(s, p);
    }
  }
}

ap_status complete_plan(ap_ctx *ctx, const cost_env *env, const plan *partial, unsigned stated,
                        const complete_options *opt, plan *best, cost_result *best_cost, complete_stats *stats) {
  search *s = calloc(1, sizeof *s);
  if (!s) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  s->env = env;
  s->g = cost_env_graph(env);
  plan_model_facts_of(s->g, &s->facts);
  s->n_devices = cost_env_cluster(env)->n_devices;
  s->stated = stated & COMPLETE_FIELDS;
  search_space_init(&s->space, env, partial, s->stated, partial->global_batch_size, partial->seq_length);
  s->opt = opt ? *opt : complete_options_defaults();
  if (s->opt.max_evaluations < 1) s->opt.max_evaluations = 1;
  s->best = best;
  s->best_cost = best_cost;

  plan p = *partial;
  s->split_given = partial->n_stage_layers != 0;
  s->etp_stated = (stated & PLAN_F(ETP)) != 0;
  s->loss_stated = (stated & PLAN_F(FUSED_LOSS)) != 0;
  search_ticker_init(&s->ticker, ctx);
  /* The loss a measured run ran unless it says: its stack's default (plan/stack.h plan_stack_loss). */
  plan_stack stk = partial->stack != PLAN_STACK_DEFAULT ? partial->stack : plan_stack_default(s->facts.has_layers);
  const plan_stack_info *si = plan_stack_get(stk);
  bool loss0 = s->loss_stated ? partial->fused_loss : plan_stack_fused_default(stk);
  p.fused_loss = loss0;
  if (!is_stated(s, PLAN_F_PRECISION)) p.precision = PLAN_PREC_BF16;
  enum_mesh(s, &p);
  /* The last memory saver: where the stack's default loss is unfused but it has a fused one, a team reaches for
   * it when nothing fits without it (it saves memory only where the fused kernel keeps fewer bytes per logit:
   * not Megatron's native fusion, stack.c [MLM-fce]). */
  if (!s->stop && !s->loss_stated && !loss0 && si && si->fused_loss && s->facts.has_layers &&
      (!s->have_best || !s->best_cost->fits)) {
    p = *partial;
    if (!is_stated(s, PLAN_F_PRECISION)) p.precision = PLAN_PREC_BF16;
    p.fused_loss = true;
    enum_mesh(s, &p);
  }

  ap_status st = AP_OK;
  if (s->ticker.cancelled) {
    st = ctx_fail(ctx, AP_CANCELLED, "completion: cancelled after %lld plans evaluated", (long long)s->stats.n_evaluated);
  } else if (s->hard) {
    st = ctx_fail(ctx, s->hard, "%s", s->first_error);
  } else if (!s->have_best) {
    /* With every field stated there was one candidate, and its violated constraint is the whole answer. */
    bool all = s->stated == COMPLETE_FIELDS;
    st = ctx_fail(ctx, all ? AP_INVALID : AP_INFEASIBLE, "%s%s",
                  all ? "" : "no valid plan completes the stated fields; the first candidate failed with: ",
                  s->first_error[0] ? s->first_error : "no candidates");
  }
  if (stats) *stats = s->stats;
  free(s);
  return st;
}
