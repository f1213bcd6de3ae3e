/* `autopar run`: trains a model under a plan for real with the reference executor (cli layer; docs/executor.md).
 * The CLI links no MPI: it finds the rank program autopar-rank (built by the optional part "exec") beside its
 * own binary or in the install prefix's libexec/autopar/, runs it once with --check, which validates the
 * model, the plan, the weights and the data and says how many ranks the plan needs, then launches it under
 * mpirun (`mpirun --oversubscribe -np N`, with --allow-run-as-root when run as root; --mpirun changes the
 * launcher) with one OpenBLAS thread per rank. Rank 0 writes the result to a temporary file that this command
 * prints. A failing rank prints one line and aborts the job (MPI_Abort ends every rank); this command then
 * reports that line. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

enum { MAX_ARGS = 96 };

/* The rank program: beside this binary, else ../libexec/autopar/ from it. Returns false when neither exists. */
bool cli_find_rank_program(char *out, size_t n) {
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return false;
  self[len] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash) return false;
  *slash = '\0';
  snprintf(out, n, "%s/autopar-rank", self);
  if (access(out, X_OK) == 0) return true;
  snprintf(out, n, "%s/../libexec/autopar/autopar-rank", self);
  return access(out, X_OK) == 0;
}

/* Runs argv with stdout to out_path and stderr to err_path; returns the exit status (128+signal when killed).
 * The child leads its own process group, and this process is a child subreaper (Linux prctl), so that when the
 * launcher exits, anything it started and left behind is killed by group and reaped here: no run leaves
 * processes behind. */
int cli_spawn(char *const argv[], const char *out_path, const char *err_path) {
  fflush(stdout);
  fflush(stderr);
  prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fo < 0 || fe < 0) _exit(127);
    dup2(fo, 1);
    dup2(fe, 2);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  kill(-pid, SIGKILL); /* whatever of the launcher's group is still there (ESRCH when nothing is) */
  for (int i = 0; i < 500; i++) { /* reap the orphans handed to this subreaper, 5 s at most */
    pid_t r = waitpid(-1, NULL, WNOHANG);
    if (r < 0 && errno == ECHILD) break;
    if (r <= 0) nanosleep(&(struct timespec){0, 10000000L}, NULL);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Why a launch failed, in one line. A rank killed by a signal (the kernel's out-of-memory killer, a crash)
 * is named with its signal: OpenMPI's mpirun says "process rank R with PID P on node H exited on signal S
 * (NAME)" among its banner lines ([orterun:proc-aborted-strsignal] and [orterun:proc-aborted], without the
 * name, in help-orterun.txt, /usr/share/openmpi/ of Debian 12's openmpi-bin 4.1.4), and a launcher that
 * was itself killed ends with status 128 + S. Otherwise the rank program's own line (the one after
 * "autopar-rank: "), else the first line of the text that is not a banner of dashes. */
void cli_launch_message(const char *text, int status, char *out, size_t n) {
  const char *p = text ? strstr(text, "process rank ") : NULL;
  int rank = -1, sig = 0;
  char name[64] = "";
  for (; p; p = strstr(p + 1, "process rank ")) {
    const char *on = strstr(p, " exited on signal ");
    if (on && sscanf(p, "process rank %d", &rank) == 1 && sscanf(on, " exited on signal %d (%63[^)])", &sig, name) >= 1)
      break;
    rank = -1;
  }
  if (rank >= 0 && sig > 0) {
    snprintf(out, n, "rank %d was killed by signal %d (%s)%s; the job was ended", rank, sig, *name ? name : strsignal(sig),
             sig == SIGKILL ? ", as the kernel's out-of-memory killer does" : "");
    return;
  }
  p = text ? strstr(text, "autopar-rank: ") : NULL;
  if (p) {
    p += strlen("autopar-rank: ");
  } else if (status > 128 && status < 128 + 65) {
    snprintf(out, n, "the launcher or a rank was killed by signal %d (%s); the job was ended", status - 128,
             strsignal(status - 128));
    return;
  } else {
    for (p = text; p && *p && (*p == '-' || *p == '\n' || *p == ' ');) p++; /* OpenMPI's banners of dashes */
    if (!p || !*p) p = "no message";
  }
  size_t k = strcspn(p, "\n");
  snprintf(out, n, "%.*s", (int)(k < 900 ? k : 900), p);
}

static void print_text(json_t *r) {
  json_t *steps = json_object_get(r, "steps");
  printf("autopar run: %s, plan %s, %lld ranks, fp32", json_string_value(json_object_get(r, "model")),
         json_string_value(json_object_get(r, "plan")), (long long)json_integer_value(json_object_get(r, "ranks")));
  const char *pp = json_string_value(json_object_get(r, "plan_precision"));
  if (pp && strcmp(pp, "fp32") != 0) printf(" (the plan's %s runs in fp32)", pp);
  printf("\n");
  size_t i;
  json_t *s;
  json_array_foreach(steps, i, s) {
    printf("step %4lld  loss %.6f  time %.4f s\n", (long long)json_integer_value(json_object_get(s, "step")),
           json_number_value(json_object_get(s, "loss")), json_number_value(json_object_get(s, "time_s")));
  }
  printf("iteration time %.4f s (median of the steps after the first); peak RSS per rank:",
         json_number_value(json_object_get(r, "iteration_time_s")));
  json_t *m;
  json_array_foreach(json_object_get(r, "peak_rss_bytes"), i, m) printf(" %.1f MB", json_number_value(m) / 1e6);
  printf("\n");
}

/* `--record FILE`: the columns of the row appended to a runs.csv file (shared/reference/README.md). */
static const char record_header[] =
    "id,source,stack,model,arch,num_layers,hidden_size,ffn_hidden_size,num_attention_heads,num_kv_heads,vocab_size,"
    "seq_length,mlp,num_experts,top_k,gpu,num_gpus,global_batch_size,micro_batch_size,tp,pp,dp,cp,ep,vpp,"
    "sequence_parallel,recompute,zero_stage,precision,outcome,measured_tokens_per_s_per_gpu,measured_peak_mem_GiB,"
    "mem_convention,derivation,notes\n";

static long long jint(json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }

/* Reads the runs table that --record appends to: *old is its text ("" when the file does not exist yet) and
 * *n_rows its rows. Refuses (false, one line printed) a target that is not a regular file or a table with
 * another header; cmd_run calls it before the launch, so that a refused table costs no training, and again
 * at the append, which then sees the table as it is. */
static bool record_read(const char *path, char **old, long long *n_rows) {
  struct stat sb;
  *old = NULL;
  *n_rows = 0;
  if (stat(path, &sb) != 0 && errno == ENOENT) {
    *old = strdup("");
    return *old != NULL;
  }
  if (!(*old = cli_read_file(path))) {
    fprintf(stderr, "autopar run: --record: %s: cannot read it: %s\n", path,
            stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) ? "not a regular file; expected a runs table (CSV)" : strerror(errno));
    return false;
  }
  if (**old && strncmp(*old, record_header, sizeof record_header - 1) != 0) {
    fprintf(stderr, "autopar run: --record: %s: expected the header autopar writes (%.40s…)\n", path, record_header);
    free(*old);
    *old = NULL;
    return false;
  }
  for (const char *c = *old; *c; c++) *n_rows += *c == '\n';
  size_t n = strlen(*old);
  if (n && (*old)[n - 1] != '\n') ++*n_rows; /* a last row without its line end */
  if (*n_rows) --*n_rows;                     /* the header */
  return true;
}

/* Appends the run r to path as one row (stack autopar; peak memory: the largest rank's peak RSS), writing the
 * header first when the file is new or empty. The table is written whole through ap_write_file (a temporary
 * beside it, renamed over it), so that a failed append (a full disk) leaves the table as it was. Returns
 * false with a message printed. */
static bool record_row(ap_ctx *ctx, const char *path, const char *plan_path, json_t *r) {
  char *old = NULL;
  long long n_rows = 0;
  if (!record_read(path, &old, &n_rows)) return false;
  json_t *a = json_object_get(r, "arch"), *p = json_object_get(r, "parallel");
  double it = json_number_value(json_object_get(r, "iteration_time_s")), rss = 0;
  long long ranks = jint(r, "ranks");
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(r, "peak_rss_bytes"), i, m) if (json_number_value(m) > rss) rss = json_number_value(m);
  if (!a || !p || it <= 0 || ranks < 1) {
    fprintf(stderr, "autopar run: --record: the rank program's result lacks the run's architecture or timing\n");
    free(old);
    return false;
  }
  const char *stem = strrchr(plan_path, '/');
  stem = stem ? stem + 1 : plan_path;
  int stem_n = (int)strcspn(stem, ".");
  char *text = NULL;
  size_t text_n = 0;
  FILE *f = open_memstream(&text, &text_n);
  if (!f) {
    fprintf(stderr, "autopar run: --record: out of memory\n");
    free(old);
    return false;
  }
  size_t old_n = strlen(old);
  fputs(*old ? old : record_header, f);
  if (old_n && old[old_n - 1] != '\n') fputc('\n', f);
  free(old);
  long long E = jint(a, "num_experts");
  bool gpt2 = strcmp(json_string_value(json_object_get(a, "family")), "gpt2") == 0;
  fprintf(f, "%.*s-%lld,autopar run --plan %s,autopar,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,", stem_n, stem,
          n_rows + 1, plan_path, json_string_value(json_object_get(r, "model")), E ? "moe" : "dense",
          jint(a, "num_layers"), jint(a, "hidden_size"), jint(a, "ffn_hidden_size"), jint(a, "num_attention_heads"),
          jint(a, "num_kv_heads"), jint(a, "vocab_size"), jint(p, "seq_length"), gpt2 ? "gelu" : "swiglu");
  if (E) fprintf(f, "%lld,%lld,", E, jint(a, "top_k"));
  else fputs(",,", f);
  fprintf(f, "cpu-rank,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%lld,fp32,ok,%.6g,%.6g,rss,", ranks,
          jint(p, "global_batch_size"), jint(p, "micro_batch_size"), jint(p, "tp"), jint(p, "pp"), jint(p, "dp"),
          jint(p, "cp"), jint(p, "ep"), jint(p, "vpp"), jint(p, "sequence_parallel"),
          json_string_value(json_object_get(p, "recompute")), jint(p, "zero_stage"),
          (double)jint(r, "tokens_per_step") / it / (double)ranks, rss / 1073741824.0);
  fprintf(f, "tokens per step / iteration_time_s (median over steps after the first) / ranks; peak RSS max over "
             "ranks,schedule %s (not a runs.csv column)\n", json_string_value(json_object_get(p, "schedule")));
  bool ok = fclose(f) == 0 && text;
  if (!ok) fprintf(stderr, "autopar run: --record: out of memory\n");
  if (ok && ap_write_file(ctx, path, text) != AP_OK) {
    fprintf(stderr, "autopar run: --record: %s\n", ap_ctx_error(ctx));
    ok = false;
  }
  free(text);
  return ok;
}

int cmd_run(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *model = NULL, *plan = NULL, *init = NULL, *data = NULL, *dtype = NULL, *save = NULL, *launcher = NULL;
  const char *record = NULL, *loss = NULL, *optimizer = NULL;
  const char *steps = NULL, *seed = NULL, *lr = NULL, *b1 = NULL, *b2 = NULL, *eps = NULL, *wd = NULL, *fail = NULL;
  cli_opt opts[] = {
      {"model", OPT_STRING, "preset name or HF config.json (Llama, Mixtral or GPT-2 family), or an ONNX file", &model},
      {"plan", OPT_STRING, "autopar JSON plan file (docs/plan-format.md; autopar-plan/2 for an ONNX model)", &plan},
      {"steps", OPT_STRING, "training steps (default 1)", &steps},
      {"init", OPT_STRING, "initial weights, safetensors with Hugging Face names (default: seeded init)", &init},
      {"data", OPT_STRING, "flat little-endian token file (default: the seeded synthetic stream); ONNX: safetensors, "
                           "a tensor per graph input and labels", &data},
      {"loss", OPT_STRING, "ONNX model: cross-entropy (default) or mse", &loss},
      {"optimizer", OPT_STRING, "ONNX model: adamw (default) or sgd (plain, no momentum)", &optimizer},
      {"data-dtype", OPT_STRING, "uint16 (default, as nanoGPT's train.bin) or uint32", &dtype},
      {"save", OPT_STRING, "write the trained weights as safetensors", &save},
      {"seed", OPT_STRING, "seed of the initialisation and the synthetic data (default 0)", &seed},
      {"lr", OPT_STRING, "AdamW learning rate (default 3e-4)", &lr},
      {"beta1", OPT_STRING, "AdamW beta1 (default 0.9)", &b1},
      {"beta2", OPT_STRING, "AdamW beta2 (default 0.95)", &b2},
      {"eps", OPT_STRING, "AdamW eps (default 1e-8)", &eps},
      {"weight-decay", OPT_STRING, "AdamW weight decay on tensors of 2+ dimensions (default 0.1)", &wd},
      {"mpirun", OPT_STRING, "launcher command (default \"mpirun --oversubscribe\")", &launcher},
      {"fail-rank", OPT_STRING, "testing: rank R fails on purpose in the first step", &fail},
      {"record", OPT_STRING, "append the run to a runs.csv file (stack autopar, peak RSS; for validate --cluster)", &record},
      {"json", OPT_FLAG, "print the result as JSON (format autopar-run/1)", &json},
      {"help", OPT_FLAG, "show this help", &help},
  };
  int n_opts = (int)(sizeof opts / sizeof opts[0]), n_pos;
  const char *pos[1];
  if (!cli_parse("run", argc, argv, opts, n_opts, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("run", "--model M --plan PLAN.json [--steps N] [--init W.safetensors] [--data TOKENS.bin] [--save OUT]\n\n"
              "Trains the model under the plan with the reference executor (fp32, OpenBLAS, OpenMPI), one process per "
              "device.", opts, n_opts);
    return 0;
  }
  if (!model || !plan) {
    fprintf(stderr, "autopar run: --model and --plan are required (see autopar run --help)\n");
    return EXIT_BAD_INPUT;
  }
  /* --save and --record can be written (cli_parse checked them); the table --record appends to must also be
   * one this command writes, which is known now, before any training. */
  char *record_old = NULL;
  long long record_rows = 0;
  if (record && !record_read(record, &record_old, &record_rows)) return EXIT_BAD_INPUT;
  free(record_old);
  char prog[PATH_MAX + 64];
  if (!cli_find_rank_program(prog, sizeof prog)) {
    fprintf(stderr, "autopar run: the executor is not built into this autopar (autopar-rank is missing beside it; "
                    "build without CORE_ONLY=1)\n");
    return EXIT_BAD_INPUT;
  }
  char dir[] = "/tmp/autopar-run.XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "autopar run: cannot create a temporary folder: %s\n", strerror(errno));
    return EXIT_INTERNAL;
  }
  char out_path[64], err_path[64], res_path[64];
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  snprintf(err_path, sizeof err_path, "%s/err", dir);
  snprintf(res_path, sizeof res_path, "%s/result.json", dir);

  /* The rank program's arguments, shared by the check and the launch. */
  char *rargs[MAX_ARGS];
  int nr = 0;
  rargs[nr++] = prog;
  const char *pairs[][2] = {{"--model", model}, {"--plan", plan}, {"--steps", steps}, {"--init", init}, {"--data", data},
                            {"--data-dtype", dtype}, {"--save", save}, {"--seed", seed}, {"--lr", lr}, {"--beta1", b1},
                            {"--beta2", b2}, {"--eps", eps}, {"--weight-decay", wd}, {"--fail-rank", fail},
                            {"--loss", loss}, {"--optimizer", optimizer}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if (pairs[i][1]) {
      rargs[nr++] = (char *)pairs[i][0];
      rargs[nr++] = (char *)pairs[i][1];
    }
  int rc = EXIT_INTERNAL;
  char msg[1024];
  rargs[nr] = "--check";
  rargs[nr + 1] = NULL;
  int st = cli_spawn(rargs, out_path, err_path);
  char *check_out = cli_read_file(out_path), *err = NULL;
  long long n_ranks = 0;
  if (st != 0) {
    err = cli_read_file(err_path);
    cli_launch_message(err, st, msg, sizeof msg);
    fprintf(stderr, "autopar run: %s\n", msg);
    rc = st == 2 ? EXIT_BAD_INPUT : EXIT_INTERNAL;
    goto done;
  }
  if (!check_out || sscanf(check_out, "ranks %lld", &n_ranks) != 1 || n_ranks < 1) {
    fprintf(stderr, "autopar run: %s --check printed no rank count\n", prog);
    goto done;
  }

  /* The launch: LAUNCHER -np N [-x OPENBLAS_NUM_THREADS] PROG ARGS --result FILE. */
  char *largv[MAX_ARGS * 2];
  int nl = 0;
  char lbuf[1024], np[32];
  snprintf(lbuf, sizeof lbuf, "%s", launcher ? launcher : "mpirun --oversubscribe");
  for (char *tok = strtok(lbuf, " "); tok && nl < MAX_ARGS; tok = strtok(NULL, " ")) largv[nl++] = tok;
  if (!launcher && geteuid() == 0) largv[nl++] = "--allow-run-as-root"; /* OpenMPI refuses root without it */
  if (!launcher) {
    largv[nl++] = "-x";
    largv[nl++] = "OPENBLAS_NUM_THREADS";
  }
  snprintf(np, sizeof np, "%lld", n_ranks);
  largv[nl++] = "-np";
  largv[nl++] = np;
  for (int i = 0; i < nr; i++) largv[nl++] = rargs[i];
  largv[nl++] = "--result";
  largv[nl++] = res_path;
  largv[nl] = NULL;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  st = cli_spawn(largv, out_path, err_path);
  char *res = cli_read_file(res_path);
  if (st != 0 || !res) {
    err = cli_read_file(err_path);
    cli_launch_message(err, st, msg, sizeof msg);
    fprintf(stderr, "autopar run: %s\n", msg);
    rc = st == 2 ? EXIT_BAD_INPUT : EXIT_INTERNAL;
    free(res);
    goto done;
  }
  json_error_t jerr;
  json_t *r = json_loads(res, 0, &jerr);
  if (!r) {
    fprintf(stderr, "autopar run: the result file is not JSON: %s\n", jerr.text);
  } else {
    if (json)
      fputs(res, stdout);
    else
      print_text(r);
    rc = record && !record_row(ctx, record, plan, r) ? EXIT_BAD_INPUT : 0;
    json_decref(r);
  }
  free(res);
done:
  free(check_out);
  free(err);
  remove(out_path);
  remove(err_path);
  remove(res_path);
  rmdir(dir);
  return rc;
}
