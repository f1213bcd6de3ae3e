/* The rank program's tally of time inside MPI calls (exec layer, bin/autopar-rank; rank.h rk_tally): a
 * diagnostic that `run --json` reports as "mpi", so that bench/exec_effects.py can set a collective's own time in
 * a step beside the profile's alpha-beta fit and the time ranks wait for each other. rank.c (its collectives) and
 * rank_pipe.c (the stage receives) call it around each MPI call; the step loop turns it on after the first step. */

#include "exec/rank.h"

/* With AUTOPAR_MPI_SKEW set (a diagnostic: bench/exec_effects.py), a barrier on comm before a collective, its wait
 * tallied apart as "skew" (how late the group's last rank arrives), so that the collective's own time is left. */
double rk_tally_begin(rk_state *s, MPI_Comm comm, bool collective) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  s->tally_on = s->tallying && n > 1;
  s->skew_s = 0;
  if (s->tally_on && s->skew_barrier && collective) {
    double t0 = MPI_Wtime();
    MPI_Barrier(comm);
    s->skew_s = MPI_Wtime() - t0;
  }
  return MPI_Wtime();
}

void rk_tally_add(rk_state *s, int at, int op, double bytes, double t0) {
  if (!s->tally_on) return;
  rk_tally *e = &s->tally[at][op];
  e->calls += 1, e->bytes += bytes, e->time_s += MPI_Wtime() - t0;
  s->tally[at][RK_OP_SKEW].time_s += s->skew_s;
  s->tally[at][RK_OP_SKEW].calls += s->skew_s > 0 ? 1 : 0;
  s->tally_on = false;
}
