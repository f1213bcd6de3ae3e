/* `autopar profile [--ranks N] [--quick] -o cluster.json` (cli layer): measures this machine as the reference
 * executor uses it and writes a cluster file of N CPU devices with their profile inline (docs/executor.md,
 * "Profiling"). The measuring is MPI work, so it runs in the rank program (src/exec/rank_prof.c), launched as
 * `autopar run` launches it (cmd_run.c: mpirun --oversubscribe -np N, one OpenBLAS thread per rank). This
 * command then loads the written file as a cluster, the check that plan, estimate and validate accept it, and
 * only then writes it to -o through ap_write_file (a temporary beside it, renamed over it): a failed or
 * refused profile leaves -o as it was. -o is checked before the measuring (cli_parse). N defaults to the
 * machine's cores. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cmd_profile(ap_ctx *ctx, int argc, char **argv) {
  bool help = false, quick = false;
  const char *out = NULL, *launcher = NULL;
  int64_t ranks = 0;
  cli_opt opts[] = {
      {"ranks", OPT_INT, "CPU devices (MPI ranks) of the cluster (default: the machine's cores)", &ranks},
      {"output", OPT_STRING, "the cluster file to write (-o)", &out},
      {"quick", OPT_FLAG, "fewer shapes, sizes and repetitions (about a second; for tests)", &quick},
      {"mpirun", OPT_STRING, "launcher command (default \"mpirun --oversubscribe\")", &launcher},
      {"help", OPT_FLAG, "show this help", &help},
  };
  int n_opts = (int)(sizeof opts / sizeof opts[0]), n_pos;
  const char *pos[1];
  if (!cli_parse("profile", argc, argv, opts, n_opts, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("profile", "[--ranks N] [--quick] -o CLUSTER.json\n\n"
              "Measures OpenBLAS GEMM throughput at a transformer layer's shapes, memory bandwidth and MPI alpha-beta "
              "per collective, and writes a cluster of N CPU devices carrying that profile.", opts, n_opts);
    return 0;
  }
  if (!out) {
    fprintf(stderr, "autopar profile: -o: the output file is required (see autopar profile --help)\n");
    return EXIT_BAD_INPUT;
  }
  if (ranks == 0) ranks = sysconf(_SC_NPROCESSORS_ONLN);
  if (ranks < 1 || ranks > 256) {
    fprintf(stderr, "autopar profile: --ranks: expected 1 … 256, got %lld\n", (long long)ranks);
    return EXIT_BAD_INPUT;
  }
  char prog[PATH_MAX + 64];
  if (!cli_find_rank_program(prog, sizeof prog)) {
    fprintf(stderr, "autopar profile: the executor is not built into this autopar (autopar-rank is missing beside "
                    "it; build without CORE_ONLY=1)\n");
    return EXIT_BAD_INPUT;
  }
  char dir[] = "/tmp/autopar-profile.XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "autopar profile: cannot create a temporary folder: %s\n", strerror(errno));
    return EXIT_INTERNAL;
  }
  char out_path[64], err_path[64], res_path[64], np[32], lbuf[1024];
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  snprintf(err_path, sizeof err_path, "%s/err", dir);
  snprintf(res_path, sizeof res_path, "%s/cluster.json", dir);
  char *largv[64];
  int nl = 0;
  snprintf(lbuf, sizeof lbuf, "%s", launcher ? launcher : "mpirun --oversubscribe");
  for (char *tok = strtok(lbuf, " "); tok && nl < 48; tok = strtok(NULL, " ")) largv[nl++] = tok;
  if (!launcher && geteuid() == 0) largv[nl++] = "--allow-run-as-root";
  if (!launcher) {
    largv[nl++] = "-x";
    largv[nl++] = "OPENBLAS_NUM_THREADS";
  }
  snprintf(np, sizeof np, "%lld", (long long)ranks);
  largv[nl++] = "-np";
  largv[nl++] = np;
  largv[nl++] = prog;
  largv[nl++] = "--profile";
  largv[nl++] = res_path;
  if (quick) largv[nl++] = "--quick";
  largv[nl] = NULL;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  int st = cli_spawn(largv, out_path, err_path), rc = EXIT_INTERNAL;
  char *text = st == 0 ? cli_read_file(res_path) : NULL;
  if (!text) {
    char *err = cli_read_file(err_path), msg[1024];
    cli_launch_message(err, st, msg, sizeof msg);
    fprintf(stderr, "autopar profile: %s\n", msg);
    free(err);
    rc = st == 2 ? EXIT_BAD_INPUT : EXIT_INTERNAL;
  } else {
    ap_cluster *cl = NULL;
    ap_status s = ap_cluster_load(ctx, res_path, &cl);
    if (s) {
      rc = cli_fail(ctx, s);
    } else {
      if (ap_write_file(ctx, out, text) != AP_OK) { /* the one writer: a failed write leaves out as it was */
        fprintf(stderr, "autopar profile: %s\n", ap_ctx_error(ctx));
        rc = EXIT_BAD_INPUT;
      } else {
        printf("autopar profile: %lld CPU ranks measured; wrote %s\n", (long long)ranks, out);
        rc = 0;
      }
    }
    ap_cluster_free(cl);
  }
  free(text);
  remove(out_path);
  remove(err_path);
  remove(res_path);
  rmdir(dir);
  return rc;
}
