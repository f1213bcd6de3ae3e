/* `autopar calibrate FILE.csv [--device NAME] -o calibrated.json` (cli layer). */
#include <stdio.h>

#include "cli/cli.h"

int cmd_calibrate(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *device = NULL, *output = NULL, *calibration = NULL;
  cli_opt opts[] = {{"device", OPT_STRING, "fit only the rows on this device type (e.g. h100-sxm)", &device},
                    {"output", OPT_STRING, "where to write the calibration (also -o)", &output},
                    {"calibration", OPT_STRING, "start from this calibration instead of the built-in one", &calibration},
                    {"json", OPT_FLAG, "print the report as JSON (format autopar-calibrate/1, docs/json.md)", &json},
                    {"help", OPT_FLAG, "show this help", &help}};
  enum { N = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("calibrate", argc, argv, opts, N, pos, 1, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("calibrate", "FILE.csv [--device NAME] -o calibrated.json [--json]\n\nFits the cost model's constants "
                           "per device type and link class to measured runs (the runs.csv format).",
              opts, N);
    return 0;
  }
  if (n_pos != 1 || !output) {
    fprintf(stderr, "autopar calibrate: expected FILE.csv and -o OUTPUT.json (see autopar calibrate --help)\n");
    return EXIT_BAD_INPUT;
  }
  ap_status st = calibration ? ap_ctx_set_calibration(ctx, calibration) : AP_OK;
  char *out = NULL;
  if (!st) st = ap_calibrate(ctx, pos[0], device, output, json ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  if (st) return cli_fail(ctx, st);
  cli_print_free(out);
  return 0;
}
