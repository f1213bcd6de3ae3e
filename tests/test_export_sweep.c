/* The export sweeps (plan layer, export_*.c): scenarios over the models of issue 10 (Llama 3, Qwen3,
 * DeepSeek-V3, Mixtral, GPT-3 and others) with tp, pp, cp, ep, virtual stages, uneven splits, ZeRO stages
 * and recompute, each with the formats it must export to; every combination of recompute, ZeRO, schedule,
 * sequence parallelism, precision and overlap for four models; and the torchtitan flavor table of
 * export_torchtitan.c against the flavors extracted from torchtitan's sources. Every export passes the
 * checks of export_verify.h, which parse it against tests/data/framework_args.tsv. */
#include <stdlib.h>

#include "testutil.h"

#include "export_check.h"
#include "export_verify.h"

/* The flavors export_torchtitan.c matches models against are torchtitan's: each row's sizes are the ones
 * its registry sets at the version the row names, and each base configuration exists there. */
static int64_t dim_of(const char *dims, const char *key) {
  char pat[48];
  snprintf(pat, sizeof pat, "%s=", key);
  for (const char *c = strstr(dims, pat); c; c = strstr(c + 1, pat))
    if (c == dims || c[-1] == ',' || c[-1] == ':') return strtoll(c + strlen(pat), NULL, 10);
  return -1;
}

static void test_flavor_table(void **state) {
  (void)state;
  for (size_t i = 0; i < tt_n_flavors; i++) {
    const tt_flavor *t = &tt_flavors[i];
    for (unsigned v = TT_CURRENT; v <= TT_TOML; v <<= 1) {
      if (!(t->versions & v)) continue;
      const char *fw = v == TT_CURRENT ? "torchtitan" : "torchtitan-toml";
      char key[128];
      snprintf(key, sizeof key, "model:%s:%s", t->model, t->flavor);
      const fa_row *r = fa_find(fw, key);
      if (!r) fail_msg("%s has no flavor %s", fw, key);
      static const char *const names[] = {"dim", "n_layers", "n_heads", "n_kv_heads", "num_experts"};
      const int64_t mine[] = {t->dim, t->n_layers, t->n_heads, t->n_kv_heads, t->n_experts};
      for (size_t k = 0; k < AP_COUNT(names); k++) {
        int64_t theirs = dim_of(r->type, names[k]);
        if (theirs >= 0 && mine[k] != 0 && theirs != mine[k])
          fail_msg("%s %s: %s = %lld in torchtitan, %lld in export_torchtitan.c", fw, key, names[k], (long long)theirs,
                   (long long)mine[k]);
        if (theirs < 0 && k == 1) fail_msg("%s %s states no %s", fw, key, names[k]); /* dim may be a class default */
      }
    }
    if (t->versions & TT_CURRENT) {
      char key[128];
      snprintf(key, sizeof key, "config:%s:%s", t->model, t->base);
      if (!fa_find("torchtitan", key)) fail_msg("torchtitan has no config function %s", key);
    }
  }
  /* Where the table came from. */
  const fa_row *m = fa_find("meta", "megatron");
  assert_non_null(m);
  assert_non_null(strstr(m->type, "d98e8a64"));
}

/* Scenarios: a model, a plan, and the formats that must export it (the others may refuse, with a reason
 * naming the format). */
enum { F_MG = 1, F_DS = 2, F_TT = 4, F_TTT = 8, F_JS = 16 };
static const char *const all_formats[] = {"megatron", "deepspeed", "torchtitan", "torchtitan-toml", "json"};
static const struct {
  int model;
  const char *plan;
  int must;
} scenarios[] = {
    {M_LLAMA8, "{'cluster':'dgx-h100','parallel':{'dp':8},'optimizer':{'zero_stage':1}}", F_MG | F_DS | F_TT | F_TTT | F_JS},
    {M_LLAMA8, "{'parallel':{'dp':4,'tp':2},'sequence_parallel':true,'recompute':{'granularity':'selective'}}",
     F_MG | F_DS | F_TTT | F_JS},
    {M_LLAMA8, "{'parallel':{'tp':4,'pp':2},'pipeline':{'n_micro_batches':16},'recompute':{'granularity':'full'}}",
     F_MG | F_DS | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'tp':4,'cp':2},'seq_length':16384,'sequence_parallel':true}", F_MG | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8}}",
     F_MG | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'dp':2,'pp':4},'pipeline':{'stage_layers':[7,9,9,7],'n_micro_batches':8}}",
     F_MG | F_DS | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'dp':8},'optimizer':{'zero_stage':3}}", F_MG | F_DS | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'dp':8},'optimizer':{'zero_stage':2}}", F_MG | F_DS | F_TT | F_TTT},
    {M_LLAMA8, "{'parallel':{'dp':2,'pp':4},'pipeline':{'schedule':'gpipe','n_micro_batches':8}}",
     F_MG | F_DS | F_TT | F_TTT},
    {M_LLAMA70, "{'cluster':'dgx-h100:8x8','parallel':{'dp':2,'tp':8,'pp':4,'order':['tp','cp','ep','pp','dp']}}", F_MG},
    {M_LLAMA70, "{'parallel':{'dp':2,'tp':8,'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':16}}",
     F_TT | F_TTT},
    {M_LLAMA31_8, "{'parallel':{'dp':4,'tp':2},'precision':'fp8'}", F_MG | F_TT | F_TTT},
    {M_QWEN3MOE, "{'parallel':{'dp':8,'ep':8,'etp':1}}", F_MG | F_TT | F_TTT},
    {M_QWEN3MOE, "{'parallel':{'dp':4,'tp':2,'ep':4},'sequence_parallel':true}", F_MG | F_TTT},
    {M_QWEN3MOE, "{'parallel':{'dp':2,'pp':4,'ep':2,'etp':1},'pipeline':{'stage_layers':[11,13,13,11],'n_micro_batches':8}}",
     F_MG | F_TT | F_TTT},
    {M_DSV3, "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'pipeline':{'n_micro_batches':16},'seq_length':4096}",
     F_MG | F_TT | F_TTT},
    {M_DSV3,
     "{'parallel':{'dp':16,'pp':8,'vpp':2,'ep':16,'etp':1},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':16},"
     "'seq_length':4096}",
     F_MG | F_TT | F_TTT},
    {M_DSV3,
     "{'parallel':{'dp':4,'tp':8,'pp':4,'ep':8,'etp':1},'pipeline':{'n_micro_batches':8},'sequence_parallel':true,"
     "'recompute':{'granularity':'full'},'seq_length':4096}",
     F_MG | F_TT | F_TTT},
    {M_MIXTRAL, "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}", F_MG},
    {M_MIXTRAL, "{'parallel':{'dp':16,'ep':8},'optimizer':{'zero_stage':1}}", F_MG},
    {M_GPT3, "{'parallel':{'dp':2,'tp':8,'pp':8,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':16},"
             "'sequence_parallel':true}",
     F_MG},
    {M_GPT3, "{'parallel':{'tp':8,'pp':16},'pipeline':{'n_micro_batches':32},'recompute':{'granularity':'full'}}",
     F_MG | F_DS},
    {M_MISTRAL, "{'parallel':{'dp':2,'tp':4},'sequence_parallel':true}", F_MG | F_DS},
    {M_QWEN25, "{'parallel':{'dp':2,'tp':4},'sequence_parallel':true}", F_MG | F_DS},
    {M_GPT2, "{'parallel':{'dp':4},'optimizer':{'zero_stage':0}}", F_MG | F_DS | F_JS},
};

static void test_scenarios(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int n_exports = 0;
  for (size_t i = 0; i < AP_COUNT(scenarios); i++)
    for (size_t f = 0; f < AP_COUNT(all_formats); f++) {
      ap_status st;
      char *text = export_text(ctx, scenarios[i].model, scenarios[i].plan, all_formats[f], &st);
      bool must = scenarios[i].must & (1 << f);
      if (st && must) fail_msg("scenario %zu (%s) as %s: %s", i, scenarios[i].plan, all_formats[f], ap_ctx_error(ctx));
      if (st && st != AP_UNSUPPORTED) fail_msg("scenario %zu as %s: %s", i, all_formats[f], ap_ctx_error(ctx));
      if (st) {
        char prefix[40];
        snprintf(prefix, sizeof prefix, "%s export: ", all_formats[f]);
        if (strncmp(ap_ctx_error(ctx), prefix, strlen(prefix)) != 0)
          fail_msg("scenario %zu: the reason does not name the format: %s", i, ap_ctx_error(ctx));
      } else {
        n_exports++;
      }
      free(text);
    }
  print_message("# %zu scenarios, %d exports checked against framework_args.tsv\n", AP_COUNT(scenarios), n_exports);
  assert_true(AP_COUNT(scenarios) >= 20);
  ap_ctx_free(ctx);
}

/* Every combination of recompute × ZeRO × schedule × sequence parallel × precision × overlap for four
 * models: each valid plan either exports in each format, passing all the checks above (Megatron's rules and
 * split, DeepSpeed's batch identity, torchtitan's degrees and split, the JSON round trip), or is refused with
 * AP_UNSUPPORTED. */
static void test_sweep(void **state) {
  (void)state;
  static const struct {
    int model;
    const char *degrees;     /* the "parallel" object without vpp */
    const char *split_vpp1;  /* stage_layers for one chunk per rank, or "" for the even split */
  } bases[] = {
      {M_LLAMA70, "'dp':2,'tp':8,'pp':4", ""},
      {M_MIXTRAL, "'dp':8,'tp':2,'pp':4,'ep':8,'etp':1", ""},
      {M_GPT3, "'tp':8,'pp':8", ""},
      {M_DSV3, "'dp':8,'pp':8,'ep':8,'etp':1", ",'stage_layers':[6,8,8,8,8,8,8,7]"},
  };
  static const char *const recomputes[] = {"'granularity':'none'", "'granularity':'selective'", "'granularity':'op'",
                                           "'granularity':'full','num_layers':0", "'granularity':'full','num_layers':2"};
  static const struct {
    const char *name;
    int vpp;
  } schedules[] = {{"1f1b", 1}, {"gpipe", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"zb-v", 2}};
  static const char *const precisions[] = {"bf16", "fp16", "fp8"};
  static const char *const formats[] = {"megatron", "deepspeed", "torchtitan", "torchtitan-toml", "json"};
  int n_valid = 0, n_ok[5] = {0}, n_refused[5] = {0};
  ap_ctx *ctx = ap_ctx_new();
  for (size_t b = 0; b < AP_COUNT(bases); b++)
    for (size_t r = 0; r < AP_COUNT(recomputes); r++)
      for (int zero = 0; zero <= 3; zero++)
        for (size_t s = 0; s < AP_COUNT(schedules); s++)
          for (int sp = 0; sp <= 1; sp++)
            for (size_t pr = 0; pr < AP_COUNT(precisions); pr++)
              for (int ov = 0; ov < 8; ov++) {
                char text[1024];
                snprintf(text, sizeof text,
                         "{'parallel':{%s,'vpp':%d},'pipeline':{'schedule':'%s','n_micro_batches':16%s},"
                         "'sequence_parallel':%s,'recompute':{%s},'optimizer':{'zero_stage':%d},'precision':'%s',"
                         "'overlap':{'grad_reduce':%s,'param_gather':%s,'tp_comm':%s}}",
                         bases[b].degrees, schedules[s].vpp, schedules[s].name,
                         schedules[s].vpp == 1 ? bases[b].split_vpp1 : "", sp ? "true" : "false", recomputes[r], zero,
                         precisions[pr], ov & 1 ? "true" : "false", ov & 2 ? "true" : "false", ov & 4 ? "true" : "false");
                ap_plan *ap = plan_of(text);
                const graph *g = model_graph(models[bases[b].model]);
                ctx_clear(ctx);
                bool valid = plan_validate(ctx, &ap->p, g, plan_n_devices(&ap->p), NULL) == AP_OK;
                ap_plan_free(ap);
                if (!valid) continue;
                n_valid++;
                for (size_t f = 0; f < AP_COUNT(formats); f++) {
                  if (f == 4 && ov) continue; /* the JSON round trip goes through a file: a sample suffices */
                  ap_status st;
                  char *out = export_text(ctx, bases[b].model, text, formats[f], &st);
                  if (st && st != AP_UNSUPPORTED) fail_msg("%s as %s: %s", text, formats[f], ap_ctx_error(ctx));
                  if (st) {
                    n_refused[f]++;
                    char prefix[32];
                    snprintf(prefix, sizeof prefix, "%s export: ", formats[f]);
                    if (strncmp(ap_ctx_error(ctx), prefix, strlen(prefix)) != 0)
                      fail_msg("%s: the reason does not name the format: %s", text, ap_ctx_error(ctx));
                  } else {
                    n_ok[f]++;
                  }
                  free(out);
                }
              }
  ap_ctx_free(ctx);
  print_message("# %d valid plans; exported (refused): megatron %d (%d), deepspeed %d (%d), torchtitan %d (%d), "
                "torchtitan-toml %d (%d), json %d\n",
                n_valid, n_ok[0], n_refused[0], n_ok[1], n_refused[1], n_ok[2], n_refused[2], n_ok[3], n_refused[3], n_ok[4]);
  assert_true(n_valid > 2000);
  assert_true(n_ok[0] > n_valid / 3); /* Megatron refuses zero-bubble schedules and per-op recompute */
  assert_true(n_ok[1] > 300);
  /* torchtitan has no Mixtral or GPT-3 (half the bases), and refuses fp16 and partial full recompute. */
  assert_true(n_ok[2] > n_valid / 10);
  assert_true(n_ok[3] > n_valid / 10);
  assert_int_equal(n_refused[4], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flavor_table),
      cmocka_unit_test(test_scenarios),
      cmocka_unit_test(test_sweep),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
