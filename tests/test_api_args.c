/* The public API on misuse (issue 9, defect 4): every function of include/autopar.h is probed with each of its
 * pointer arguments NULL in turn (and with out-of-range enums and empty names) while the others are valid.
 * Each probe must return AP_INVALID with a one-line message naming the function or the argument (through a
 * context when one is given), never crash; value-returning functions return 0, "" or NULL. Before the
 * argument checks, 28 of the 71 probes on the functions that existed then crashed and 25 returned another
 * status (the probe: 17 of 37 crashed). */
#include <stdlib.h>

#include "testutil.h"

typedef struct {
  ap_ctx *ctx;
  ap_model *m;
  ap_cluster *c;
  ap_plan *p;
  char *s;
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  if (!f || !(f->ctx = ap_ctx_new())) return -1;
  if (ap_model_load(f->ctx, "gpt2", &f->m) || ap_cluster_load(f->ctx, "h100:8", &f->c) || ap_plan_new(f->ctx, &f->p))
    return -1;
  if (ap_plan_set(f->ctx, f->p, "gbs", "8") || ap_plan_set(f->ctx, f->p, "seq", "1024")) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  ap_plan_free(f->p);
  ap_cluster_free(f->c);
  ap_model_free(f->m);
  ap_ctx_free(f->ctx);
  free(f);
  return 0;
}

static int n_probes;

/* One probe: the call must return AP_INVALID; with a context, leave a one-line message there. */
#define PROBE(ctx_, call)                                                                                    \
  do {                                                                                                       \
    n_probes++;                                                                                              \
    ap_status st_ = (call);                                                                                  \
    if (st_ != AP_INVALID) fail_msg("%s: status %s, want invalid value", #call, ap_status_str(st_));         \
    if ((ctx_) && (!*ap_ctx_error(ctx_) || strchr(ap_ctx_error(ctx_), '\n')))                                \
      fail_msg("%s: message \"%s\" is not one non-empty line", #call, ap_ctx_error(ctx_));                   \
  } while (0)

static void test_null_and_bad_arguments(void **state) {
  fx *f = *state;
  ap_ctx *x = f->ctx;
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL;
  char *s = NULL;
  ap_search_opts o;
  ap_search_opts_init(&o);
  o.global_batch_size = 8;

  PROBE(NULL, ap_ctx_set_calibration(NULL, NULL));
  PROBE(x, ap_write_file(x, NULL, "text"));
  PROBE(x, ap_write_file(x, "", "text"));
  PROBE(x, ap_write_file(x, "build/never-written.txt", NULL));
  PROBE(NULL, ap_write_file(NULL, "build/never-written.txt", "text"));
  PROBE(x, ap_check_writable(x, NULL));
  PROBE(x, ap_check_writable(x, ""));
  PROBE(NULL, ap_check_writable(NULL, "build/never-written.txt"));

  PROBE(x, ap_model_load(x, "gpt2", NULL));
  PROBE(x, ap_model_load(x, NULL, &m));
  PROBE(NULL, ap_model_load(NULL, "gpt2", &m));
  PROBE(x, ap_model_describe_json(x, NULL, 0, &s));
  PROBE(x, ap_model_describe_json(x, f->m, 0, NULL));
  PROBE(NULL, ap_model_describe_json(NULL, f->m, 0, &s));
  PROBE(x, ap_model_describe_text(x, NULL, 0, &s));
  PROBE(x, ap_model_describe_text(x, f->m, 0, NULL));
  PROBE(x, ap_models_list_json(x, NULL));
  PROBE(NULL, ap_models_list_json(NULL, &s));
  PROBE(x, ap_models_list_text(x, NULL));
  PROBE(NULL, ap_models_list_text(NULL, &s));

  PROBE(x, ap_cluster_load(x, "h100:8", NULL));
  PROBE(x, ap_cluster_load(x, NULL, &c));
  PROBE(NULL, ap_cluster_load(NULL, "h100:8", &c));
  PROBE(x, ap_cluster_describe_json(x, NULL, &s));
  PROBE(x, ap_cluster_describe_json(x, f->c, NULL));
  PROBE(NULL, ap_cluster_describe_json(NULL, f->c, &s));
  PROBE(x, ap_clusters_list_json(x, NULL));
  PROBE(NULL, ap_clusters_list_json(NULL, &s));
  PROBE(x, ap_clusters_list_text(x, NULL));
  PROBE(NULL, ap_clusters_list_text(NULL, &s));

  PROBE(x, ap_plan_new(x, NULL));
  PROBE(NULL, ap_plan_new(NULL, &p));
  PROBE(x, ap_plan_load(x, NULL, &p));
  PROBE(x, ap_plan_load(x, "data/plans/llama-3-70b-64xh100.json", NULL));
  PROBE(NULL, ap_plan_load(NULL, "data/plans/llama-3-70b-64xh100.json", &p));
  PROBE(x, ap_plan_set(x, NULL, "tp", "2"));
  PROBE(x, ap_plan_set(x, f->p, NULL, "2"));
  PROBE(x, ap_plan_set(x, f->p, "tp", NULL));
  PROBE(NULL, ap_plan_set(NULL, f->p, "tp", "2"));
  PROBE(x, ap_plan_parse(x, NULL, &p));
  PROBE(x, ap_plan_parse(x, "{}", NULL));
  PROBE(NULL, ap_plan_parse(NULL, "{}", &p));
  PROBE(x, ap_cluster_describe_text(x, NULL, &s));
  PROBE(x, ap_cluster_describe_text(x, f->c, NULL));
  PROBE(NULL, ap_cluster_describe_text(NULL, f->c, &s));
  PROBE(x, ap_plan_json(x, NULL, &s));
  PROBE(x, ap_plan_json(x, f->p, NULL));
  PROBE(NULL, ap_plan_json(NULL, f->p, &s));

  PROBE(x, ap_estimate(x, NULL, f->c, f->p, AP_OUT_TEXT, &s));
  PROBE(x, ap_estimate(x, f->m, NULL, f->p, AP_OUT_TEXT, &s));
  PROBE(x, ap_estimate(x, f->m, f->c, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_estimate(x, f->m, f->c, f->p, AP_OUT_TEXT, NULL));
  PROBE(x, ap_estimate(x, f->m, f->c, f->p, 7, &s)); /* an unknown format returned AP_OK */
  PROBE(NULL, ap_estimate(NULL, f->m, f->c, f->p, AP_OUT_TEXT, &s));
  PROBE(x, ap_simulate(x, NULL, f->c, f->p, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_simulate(x, f->m, NULL, f->p, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_simulate(x, f->m, f->c, NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_simulate(x, f->m, f->c, f->p, NULL, AP_OUT_TEXT, NULL));
  PROBE(x, ap_simulate(x, f->m, f->c, f->p, "", AP_OUT_TEXT, &s));
  PROBE(x, ap_simulate(x, f->m, f->c, f->p, NULL, -1, &s));
  PROBE(NULL, ap_simulate(NULL, f->m, f->c, f->p, NULL, AP_OUT_TEXT, &s));

  PROBE(x, ap_validate(x, NULL, 0, &s));
  PROBE(x, ap_validate(x, "x.csv", 0, NULL));
  PROBE(x, ap_validate(x, "x.csv", 64, &s));
  PROBE(NULL, ap_validate(NULL, "x.csv", 0, &s));
  PROBE(x, ap_validate_on(x, NULL, "h100:8", 0, &s));
  PROBE(x, ap_validate_on(x, "x.csv", "h100:8", 0, NULL));
  PROBE(x, ap_validate_on(x, "x.csv", "", 0, &s));
  PROBE(NULL, ap_validate_on(NULL, "x.csv", NULL, 0, &s));
  PROBE(x, ap_validate_stack(x, NULL, NULL, "torchtitan", 0, &s));
  PROBE(x, ap_validate_stack(x, "x.csv", NULL, "torchtitan", 0, NULL));
  PROBE(x, ap_validate_stack(x, "x.csv", NULL, "no-such-stack", 0, &s));
  PROBE(NULL, ap_validate_stack(NULL, "x.csv", NULL, NULL, 0, &s));
  PROBE(x, ap_validate_cv(x, NULL, "source", 0, &s));
  PROBE(x, ap_validate_cv(x, "x.csv", "source", 0, NULL));
  PROBE(x, ap_validate_cv(x, "x.csv", "no-such-grouping", 0, &s));
  PROBE(x, ap_validate_cv(x, "x.csv", "source", 2, &s));
  PROBE(NULL, ap_validate_cv(NULL, "x.csv", "source", 0, &s));

  PROBE(x, ap_export(x, f->m, NULL, "json", &s));
  PROBE(x, ap_export(x, f->m, f->p, NULL, &s));
  PROBE(x, ap_export(x, f->m, f->p, "json", NULL));
  PROBE(NULL, ap_export(NULL, f->m, f->p, "json", &s));

  PROBE(x, ap_calibrate(x, NULL, NULL, "build/never-written.json", AP_OUT_TEXT, &s));
  PROBE(x, ap_calibrate(x, "x.csv", NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_calibrate(x, "x.csv", NULL, "build/never-written.json", AP_OUT_TEXT, NULL));
  PROBE(x, ap_calibrate(x, "x.csv", NULL, "build/never-written.json", 9, &s));
  PROBE(NULL, ap_calibrate(NULL, "x.csv", NULL, "build/never-written.json", AP_OUT_TEXT, &s));

  PROBE(x, ap_plan_search(x, NULL, f->c, &o, AP_OUT_TEXT, &s, NULL));
  PROBE(x, ap_plan_search(x, f->m, NULL, &o, AP_OUT_TEXT, &s, NULL));
  PROBE(x, ap_plan_search(x, f->m, f->c, NULL, AP_OUT_TEXT, &s, NULL));
  PROBE(x, ap_plan_search(x, f->m, f->c, &o, AP_OUT_TEXT, NULL, NULL));
  PROBE(x, ap_plan_search(x, f->m, f->c, &o, 3, &s, NULL));
  PROBE(NULL, ap_plan_search(NULL, f->m, f->c, &o, AP_OUT_TEXT, &s, NULL));

  ap_report_inputs in = {"t", NULL, NULL, NULL, NULL, NULL, NULL};
  PROBE(x, ap_report_html(x, NULL, "build/never-written.html"));
  PROBE(x, ap_report_html(x, &in, NULL));
  PROBE(x, ap_report_html(x, &in, ""));
  PROBE(NULL, ap_report_html(NULL, &in, "build/never-written.html"));
  PROBE(x, ap_compare_clusters(x, NULL, "h100:8", &o, NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_compare_clusters(x, f->m, NULL, &o, NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_compare_clusters(x, f->m, "h100:8", NULL, NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_compare_clusters(x, f->m, "h100:8", &o, NULL, NULL, AP_OUT_TEXT, NULL));
  PROBE(x, ap_compare_clusters(x, f->m, "h100:8", &o, NULL, NULL, 5, &s));
  PROBE(NULL, ap_compare_clusters(NULL, f->m, "h100:8", &o, NULL, NULL, AP_OUT_TEXT, &s));
  PROBE(x, ap_ctx_add_part(x, NULL));
  PROBE(NULL, ap_ctx_add_part(NULL, NULL));

  /* Outputs stay NULL after a refused call, so a caller's ap_free of them is safe. */
  assert_null(m);
  assert_null(c);
  assert_null(p);
  assert_null(s);
  assert_true(n_probes >= 70);
}

static void test_value_functions_take_null(void **state) {
  (void)state;
  ap_free(NULL);
  ap_ctx_free(NULL);
  ap_model_free(NULL);
  ap_cluster_free(NULL);
  ap_plan_free(NULL);
  ap_search_opts_init(NULL);
  ap_ctx_set_log(NULL, NULL, NULL, AP_LOG_DEBUG);
  ap_ctx_set_progress(NULL, NULL, NULL);
  assert_string_equal(ap_ctx_error(NULL), "");
  assert_int_equal(ap_ctx_status(NULL), AP_OK);
  assert_int_equal(ap_model_params_total(NULL), 0);
  assert_int_equal(ap_model_params_active(NULL), 0);
  assert_string_equal(ap_model_name(NULL), "");
  assert_int_equal(ap_cluster_n_devices(NULL), 0);
  assert_string_equal(ap_status_str((ap_status)-1), "unknown status");
  assert_null(ap_ctx_new_with_allocator(NULL, NULL));
  assert_string_equal(ap_part_name(NULL), "");
  assert_non_null(ap_version());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_null_and_bad_arguments, setup, teardown),
      cmocka_unit_test(test_value_functions_take_null),
  };
  return cmocka_run_group_tests_name("api_args", tests, NULL, NULL);
}
