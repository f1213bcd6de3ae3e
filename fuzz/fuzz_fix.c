/* libFuzzer target for the --fix parser (plan_fix_parse, src/report/plan_report.c): the input, as a string,
 * is the --fix value ("tp=8,pp=4,order=tp,cp,ep,pp,dp"). A value that parses must set only what it names and
 * leave a plan that plan_validate can judge against a built-in model; a failure says why on one line.
 * Seeds: fuzz/seeds/fix/. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"
#include "plan/plan.h"
#include "report/plan_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ap_model *model; /* loaded on the first input and kept (reachable, so not a leak) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char fix[1024];
  if (size >= sizeof fix) return 0;
  memcpy(fix, data, size);
  fix[size] = '\0';
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  if (!model && ap_model_load(ctx, "llama-2-7b", &model) != AP_OK) __builtin_trap();
  plan p;
  plan_defaults(&p);
  unsigned mask = 0;
  if (plan_fix_parse(ctx, fix, &p, &mask) == AP_OK) {
    (void)plan_validate(ctx, &p, model_graph(model), 0, "fix");
  } else if (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) {
    __builtin_trap();
  }
  ap_ctx_free(ctx);
  return 0;
}
