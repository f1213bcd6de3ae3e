/* One micro-batch through the whole model, forward then backward (exec layer; declared in exec.h): the serial
 * building block that one process, data parallelism and ZeRO run as is, and that the gradient check in
 * tests/test_exec.c holds against finite differences. Pipeline parallelism runs the same pieces stage by stage
 * (rank.c). */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

double ex_fwd_bwd(const ex_model *m, const float *w, float *g, const int32_t *in, const int32_t *labels, int64_t B,
                  int64_t S, double scale, ex_recompute rc, bool fused) {
  int64_t T = B * S, H = m->c.H, L = m->c.L;
  ex_act **acts = calloc((size_t)(L ? L : 1), sizeof *acts);
  float *x = malloc((size_t)(T * H) * sizeof *x), *y = malloc((size_t)(T * H) * sizeof *y);
  double loss = -1.0;
  bool ok = acts && x && y;
  if (ok) ex_embed_fwd(m, w, in, B, S, x);
  for (int64_t l = 0; l < L && ok; l++) {
    acts[l] = ex_layer_fwd(m, (int)l, w, x, y, B, S, rc, NULL);
    ok = acts[l] != NULL;
    float *t = x;
    x = y;
    y = t;
  }
  if (ok) {
    loss = ex_head_loss(m, w, g, x, labels, T, scale, fused, y);
    float *t = x;
    x = y;
    y = t; /* x holds the gradient now */
  }
  for (int64_t l = L - 1; l >= 0 && ok; l--) {
    ok = ex_layer_bwd(m, w, g, acts[l], x, x);
    acts[l] = NULL;
  }
  if (ok) ex_embed_bwd(m, g, in, B, S, x);
  for (int64_t l = 0; l < L && acts; l++) ex_act_free(acts[l]);
  free(acts);
  free(x);
  free(y);
  return ok ? loss : -1.0;
}
