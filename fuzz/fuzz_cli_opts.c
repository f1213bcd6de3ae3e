/* libFuzzer target for the CLI's option parser (cli_parse, src/cli/args.c, linked in beside the library):
 * the input is argv, one argument per line, parsed against an option table like `autopar plan`'s (strings,
 * counts, flags, an output; plan fields under their table's spellings). cli_parse never exits; its one-line
 * errors go to a sink, not the terminal. A parse that succeeds must leave every count in its range. Seeds: fuzz/seeds/cli_opts/.
 * FUZZ_LINK: src/cli/args.c src/cli/progress.c */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_ARGS = 32 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  cli_set_error_stream(sink);
  cli_set_write_checks(false);
  if (size > 2048) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *argv[MAX_ARGS];
  int argc = 0;
  for (char *save = NULL, *a = strtok_r(text, "\n", &save); a && argc < MAX_ARGS; a = strtok_r(NULL, "\n", &save))
    argv[argc++] = a;
  const char *model = NULL, *cluster = NULL, *fix = NULL, *output = NULL, *plan_file = NULL;
  int64_t gbs = 0, seq = 0, top = 0;
  bool json = false, help = false;
  cli_opt opts[] = {
      {"model", OPT_STRING, "", &model},   {"cluster", OPT_STRING, "", &cluster}, {"fix", OPT_STRING, "", &fix},
      {"output", OPT_STRING, "", &output}, {"plan", OPT_STRING, "", &plan_file},  {cli_field_opt("gbs"), OPT_INT, "", &gbs},
      {cli_field_opt("seq"), OPT_INT, "", &seq},          {"top", OPT_INT, "", &top},            {"json", OPT_FLAG, "", &json},
      {"help", OPT_FLAG, "", &help},
  };
  const char *pos[2];
  int n_pos = 0;
  if (cli_parse("fuzz", argc, argv, opts, (int)(sizeof opts / sizeof *opts), pos, 2, &n_pos)) {
    if (gbs < 0 || seq < 0 || seq > ((int64_t)1 << 26) || top < 0 || top > 1000 || n_pos < 0 || n_pos > 2)
      __builtin_trap();
    if ((model && !*model) || (output && !*output)) __builtin_trap(); /* empty values are refused */
  }
  free(text);
  return 0;
}
