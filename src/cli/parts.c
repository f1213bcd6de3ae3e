/* The optional parts this binary was built with (cli layer): the Makefile defines AP_PART_<NAME> for each part
 * it links (docs/build.md), and every command's context gets them, so that `--model net.onnx` or
 * `--strategy ilp` work wherever the part is built and fail with a clear message where it is not. */
#include "cli/cli.h"

ap_status cli_add_parts(ap_ctx *ctx) {
  (void)ctx;
  ap_status st = AP_OK;
#ifdef AP_PART_ONNX
  if (st == AP_OK) st = ap_ctx_add_part(ctx, ap_part_onnx());
#endif
#ifdef AP_PART_ILP
  if (st == AP_OK) st = ap_ctx_add_part(ctx, ap_part_ilp());
#endif
  return st;
}
