/* The rank program's fatal error (exec layer, bin/autopar-rank; exec/rank.h): shared by the transformer
 * runtime's rank.c and the graph runtime's grank.c, and calling neither. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "exec/rank.h"

static bool g_mpi = false;
static int g_rank = 0;

void rk_mpi_started(int rank) {
  g_mpi = true;
  g_rank = rank;
}

void rk_die(int code, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (g_mpi) {
    fprintf(stderr, "autopar-rank: rank %d: %s\n", g_rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  fprintf(stderr, "autopar-rank: %s\n", msg);
  exit(code);
}
