/* The command-line client's shared pieces (cli layer): option parsing and output helpers. The CLI holds no
 * planning logic: each subcommand parses its options, calls ap_* functions and prints. */
#ifndef AP_CLI_H
#define AP_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "autopar.h"

/* Exit statuses (DESIGN.md "Interfaces"): 0 success, 1 no feasible plan, 2 bad input. */
enum { EXIT_OK_ = 0, EXIT_INFEASIBLE = 1, EXIT_BAD_INPUT = 2, EXIT_INTERNAL = 3 };

typedef enum { OPT_FLAG, OPT_STRING, OPT_INT } cli_opt_kind;

/* One option of a subcommand: "--name VALUE" or "--name" for flags. name may list aliases after '|'
 * ("micro-batch-size|mbs"): the first is shown, all are accepted, '-' and '_' alike. An OPT_INT is a
 * decimal integer with an optional k/M/G suffix, checked against its range: a plan field's from the field
 * table, the others' from args.c's int_ranges. */
typedef struct {
  const char *name;
  cli_opt_kind kind;
  const char *help;
  void *target; /* bool *, const char **, or int64_t * */
} cli_opt;

/* Parses argv against opts; positional arguments go to positional[] (up to n_pos_max). Prints a one-line
 * error and returns false on an unknown option or a bad value. */
bool cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int n_opts, const char **positional,
               int n_pos_max, int *n_pos);
/* Sends cli_parse's error lines to f instead of stderr (NULL: stderr again); for fuzz/fuzz_cli_opts.c. */
void cli_set_error_stream(FILE *f);
/* Turns off (false) and on cli_parse's check that each output can be written (ap_check_writable), which
 * creates and removes a temporary beside it; off for fuzz/fuzz_cli_opts.c, which parses arbitrary paths. */
void cli_set_write_checks(bool on);
/* The option name of the i-th plan field of the field table (ap_plan_key): "micro-batch-size|mbs|…", the
 * canonical flag first, its aliases after, dashes for underscores; NULL past the last. cli_field_opt: the
 * same for the field one of whose spellings is key ("global_batch_size", "gbs"); NULL when none. Static. */
const char *cli_field_opt_name(size_t i);
const char *cli_field_opt(const char *key);
void cli_usage(const char *cmd, const char *synopsis, const cli_opt *opts, int n_opts);
/* Prints the context's error as "autopar: MESSAGE" and maps the status to an exit code. */
int cli_fail(ap_ctx *ctx, ap_status st);
/* Prints the notation of plan summaries in text output (tp 8, mbs 1 x 64, zb-h1, (grid), * …), once, for
 * --help. */
void cli_notation(FILE *f);
/* Parses a duration option ("--time-budget 2.5") into *out; NULL s leaves *out. On a bad value prints one
 * line naming cmd and the option and returns false. */
bool cli_parse_seconds(const char *cmd, const char *name, const char *s, double *out);
/* The export format names of the export module's table (ap_export_format), joined by sep, into out
 * (src/cli/cmd_export.c; also plan's --export help). */
void cli_export_formats(char *out, size_t n, const char *sep);
/* Prints s to stdout and frees it. */
void cli_print_free(char *s);

int cmd_models(ap_ctx *ctx, int argc, char **argv);
int cmd_clusters(ap_ctx *ctx, int argc, char **argv);
int cmd_describe(ap_ctx *ctx, int argc, char **argv);
int cmd_estimate(ap_ctx *ctx, int argc, char **argv);
int cmd_calibrate(ap_ctx *ctx, int argc, char **argv);
int cmd_simulate(ap_ctx *ctx, int argc, char **argv);
int cmd_export(ap_ctx *ctx, int argc, char **argv);
int cmd_validate(ap_ctx *ctx, int argc, char **argv);
int cmd_plan(ap_ctx *ctx, int argc, char **argv);
int cmd_run(ap_ctx *ctx, int argc, char **argv);
int cmd_profile(ap_ctx *ctx, int argc, char **argv);

/* The executor's launcher pieces (cmd_run.c), shared with `autopar profile`: the rank program autopar-rank
 * beside this binary or in PREFIX/libexec/autopar/ (false when absent); a child run with stdout and stderr to
 * files, its leftovers killed and reaped (its exit status, 128+signal when killed); the one line that says why
 * a launch failed, from its stderr text and exit status (see cmd_run.c). */
bool cli_find_rank_program(char *out, size_t n);
int cli_spawn(char *const argv[], const char *out_path, const char *err_path);
void cli_launch_message(const char *err_text, int status, char *out, size_t n);
int cmd_solve(ap_ctx *ctx, int argc, char **argv);
int cmd_compare_clusters(ap_ctx *ctx, int argc, char **argv);
int cmd_compare_search(ap_ctx *ctx, int argc, char **argv);

/* Reads a whole regular file (src/cli/report_out.c); NULL when it cannot, or when path is not a regular file
 * (a FIFO or a device is never opened for a blocking read). The caller frees it. */
char *cli_read_file(const char *path);
/* Simulates p and returns its trace (for a report's timeline), written through a file in a private temporary
 * folder; NULL with a warning on stderr when the simulation is refused (too many passes). Frees with free. */
char *cli_simulate_trace(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, ap_plan *p);
/* Writes the report of command cmd (its arguments shown under the heading) from in's documents to path. */
ap_status cli_write_report(ap_ctx *ctx, const char *path, const char *cmd, int argc, char **argv, ap_report_inputs *in);
/* Installs the progress bar on stderr for command cmd, when stderr is a terminal and quiet is false; shown
 * from delay_s seconds on (src/cli/progress.c). cli_progress_end clears its line. */
void cli_progress_begin(ap_ctx *ctx, const char *cmd, double delay_s, bool quiet);
void cli_progress_end(ap_ctx *ctx);
/* Clears the bar's line if it is drawn (before any other line goes to stderr). */
void cli_progress_clear(void);

/* Adds to ctx every optional part this binary was built with (src/cli/parts.c). */
ap_status cli_add_parts(ap_ctx *ctx);

#endif
