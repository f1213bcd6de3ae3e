/* Progress on stderr (cli layer): the callback main installs once for every command (ap_ctx_set_progress).
 * On a terminal it draws one line, rewritten in place: "autopar validate [#########...........]  45% validate";
 * when stderr is not a terminal, or with --quiet, nothing is installed and nothing is written, so logs and
 * pipes stay clean. A command whose work is short draws nothing: the bar appears only from delay_s seconds on
 * (one second for plan, so that a quick search prints only its answer). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct {
  const char *cmd;
  double t0_s, delay_s;
  bool shown;
} progress_state;

static progress_state g_progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { BAR_WIDTH = 30 };

static int on_progress(void *user, double fraction, const char *what) {
  progress_state *ps = user;
  if (now_s() - ps->t0_s < ps->delay_s) return 0;
  if (!(fraction >= 0)) fraction = 0;
  if (fraction > 1) fraction = 1;
  char bar[BAR_WIDTH + 1];
  int full = (int)(fraction * BAR_WIDTH + 0.5);
  for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < full ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  fprintf(stderr, "\r\033[Kautopar %s [%s] %3.0f%% %s", ps->cmd, bar, 100 * fraction, what ? what : "");
  fflush(stderr);
  ps->shown = true;
  return 0;
}

void cli_progress_begin(ap_ctx *ctx, const char *cmd, double delay_s, bool quiet) {
  g_progress = (progress_state){cmd, now_s(), delay_s, false};
  if (!quiet && isatty(STDERR_FILENO)) ap_ctx_set_progress(ctx, on_progress, &g_progress);
}

void cli_progress_clear(void) {
  if (!g_progress.shown) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  g_progress.shown = false;
}

void cli_progress_end(ap_ctx *ctx) {
  ap_ctx_set_progress(ctx, NULL, NULL);
  cli_progress_clear();
}
