/* The graph runtime's neural-network ops, forward and backward (exec layer; gx.h): Conv (2-D, groups, pads,
 * strides, dilations; im2col and one GEMM per sample and group on OpenBLAS, as Caffe's conv layer), the
 * training-mode BatchNormalization (statistics over the batch and spatial dims of the global batch, through
 * the run's gx_comm: so data parallelism equals one process; biased variance as ONNX and PyTorch normalise
 * with), LayerNormalization (opset 17) and MaxPool, AveragePool and GlobalAveragePool (2-D, ceil_mode 0). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx_ops.h"

#define IN(i) (&r->v[nd->in[i]])
#define OUT(i) (&r->v[nd->out[i]])
#define HAS(i) (nd->n_in > (i) && nd->in[i] >= 0)

typedef struct {
  int64_t N, C, H, W, M, kh, kw, OH, OW, sh, sw, dh, dw, pt, pl, group;
} conv_geom;

/* The window of a Conv or pool: kernel from the weight (Conv) or kernel_shape, pads [top, left, bottom,
 * right], strides and dilations. */
static bool geom(gx_run *r, int k, const gx_tensor *x, int64_t kh, int64_t kw, conv_geom *c) {
  const gx_node *nd = &r->g->nodes[k];
  if (x->rank != 4) return gx_fail(r, k, "expected a 4-D input [N, C, H, W], got rank %d", x->rank);
  const onnx_attr *ap = gx_attr(nd->node, "auto_pad");
  if (ap && ap->s && *ap->s && strcmp(ap->s, "NOTSET") != 0) return gx_fail(r, k, "auto_pad %s is not run", ap->s);
  if (gx_attr_i(nd->node, "ceil_mode", 0)) return gx_fail(r, k, "ceil_mode 1 is not run");
  int64_t p[4] = {0, 0, 0, 0}, s[2] = {1, 1}, d[2] = {1, 1};
  gx_ints(r, k, "pads", 99, p, 4);
  gx_ints(r, k, "strides", 99, s, 2);
  gx_ints(r, k, "dilations", 99, d, 2);
  *c = (conv_geom){.N = x->dims[0], .C = x->dims[1], .H = x->dims[2], .W = x->dims[3], .kh = kh, .kw = kw,
                   .sh = s[0], .sw = s[1], .dh = d[0], .dw = d[1], .pt = p[0], .pl = p[1], .group = 1};
  c->OH = (c->H + p[0] + p[2] - d[0] * (kh - 1) - 1) / s[0] + 1;
  c->OW = (c->W + p[1] + p[3] - d[1] * (kw - 1) - 1) / s[1] + 1;
  if (c->OH <= 0 || c->OW <= 0) return gx_fail(r, k, "the window is larger than the padded input");
  return true;
}

/* col[(c·kh + i)·kw + j][oh·OW + ow] = x[c][oh·sh − pt + i·dh][ow·sw − pl + j·dw] (0 outside). */
static void im2col(const conv_geom *g, const float *x, int64_t Cg, float *col) {
  int64_t L = g->OH * g->OW;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        float *row = col + ((c * g->kh + i) * g->kw + j) * L;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t h = oh * g->sh - g->pt + i * g->dh;
          for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t w = ow * g->sw - g->pl + j * g->dw;
            row[oh * g->OW + ow] = h >= 0 && h < g->H && w >= 0 && w < g->W ? x[(c * g->H + h) * g->W + w] : 0.0f;
          }
        }
      }
}

static void col2im(const conv_geom *g, const float *col, int64_t Cg, float *dx) {
  int64_t L = g->OH * g->OW;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        const float *row = col + ((c * g->kh + i) * g->kw + j) * L;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t h = oh * g->sh - g->pt + i * g->dh;
          if (h < 0 || h >= g->H) continue;
          for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t w = ow * g->sw - g->pl + j * g->dw;
            if (w >= 0 && w < g->W) dx[(c * g->H + h) * g->W + w] += row[oh * g->OW + ow];
          }
        }
      }
}

static bool conv(gx_run *r, int k, bool bwd) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *w = IN(1);
  conv_geom g;
  if (w->rank != 4) return gx_fail(r, k, "expected a 4-D weight");
  if (!geom(r, k, x, w->dims[2], w->dims[3], &g)) return false;
  g.group = gx_attr_i(nd->node, "group", 1);
  g.M = w->dims[0];
  int64_t Cg = g.C / g.group, Mg = g.M / g.group, KK = Cg * g.kh * g.kw, L = g.OH * g.OW;
  if (w->dims[1] != Cg || g.M % g.group) return gx_fail(r, k, "the weight's channels disagree with the input's");
  float *col = malloc(sizeof *col * (size_t)(KK * L));
  if (!col) return gx_fail(r, k, "out of memory");
  if (!bwd) {
    gx_tensor *y = OUT(0);
    if (!gx_alloc(y, false, 4, (int64_t[]){g.N, g.M, g.OH, g.OW})) {
      free(col);
      return gx_fail(r, k, "out of memory");
    }
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t gr = 0; gr < g.group; gr++) {
        im2col(&g, x->f + (n * g.C + gr * Cg) * g.H * g.W, Cg, col);
        float *yo = y->f + (n * g.M + gr * Mg) * L;
        if (HAS(2))
          for (int64_t m = 0; m < Mg; m++)
            for (int64_t l = 0; l < L; l++) yo[m * L + l] = IN(2)->f[gr * Mg + m];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Mg, (int)L, (int)KK, 1.0f, w->f + gr * Mg * KK,
                    (int)KK, col, (int)L, HAS(2) ? 1.0f : 0.0f, yo, (int)L);
      }
    free(col);
    return true;
  }
  const float *dy = r->grad[nd->out[0]];
  float *dx = gx_grad(r, nd->in[0]), *dw = gx_grad(r, nd->in[1]), *db = HAS(2) ? gx_grad(r, nd->in[2]) : NULL;
  float *dcol = malloc(sizeof *dcol * (size_t)(KK * L));
  if (!dx || !dw || (HAS(2) && !db) || !dcol) {
    free(col);
    free(dcol);
    return gx_fail(r, k, "out of memory");
  }
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gr = 0; gr < g.group; gr++) {
      const float *dyo = dy + (n * g.M + gr * Mg) * L;
      im2col(&g, x->f + (n * g.C + gr * Cg) * g.H * g.W, Cg, col);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Mg, (int)KK, (int)L, 1.0f, dyo, (int)L, col, (int)L,
                  1.0f, dw + gr * Mg * KK, (int)KK);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)KK, (int)L, (int)Mg, 1.0f, w->f + gr * Mg * KK, (int)KK,
                  dyo, (int)L, 0.0f, dcol, (int)L);
      col2im(&g, dcol, Cg, dx + (n * g.C + gr * Cg) * g.H * g.W);
      if (db)
        for (int64_t m = 0; m < Mg; m++)
          for (int64_t l = 0; l < L; l++) db[gr * Mg + m] += dyo[m * L + l];
    }
  free(col);
  free(dcol);
  return true;
}

/* Sums over the ranks that share the global batch (nothing on one rank). */
static void global_sum(gx_run *r, double *buf, int64_t n) {
  if (r->comm && r->comm->sum && r->comm->axes) r->comm->sum(r->comm->user, r->comm->axes, buf, n);
}

/* BatchNormalization in training mode (training_mode = 1, or the running statistics asked for as outputs,
 * the form torch.onnx.export writes in training mode); in inference form it normalises by the running
 * statistics (inputs 3 and 4). */
static bool batchnorm(gx_run *r, int k, bool bwd) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *sc = IN(1), *bi = IN(2);
  double eps = gx_attr_f(nd->node, "epsilon", 1e-5), mom = gx_attr_f(nd->node, "momentum", 0.9);
  bool train = gx_attr_i(nd->node, "training_mode", 0) || (nd->n_out > 1 && nd->out[1] >= 0);
  if (x->rank < 2) return gx_fail(r, k, "expected an input [N, C, ...]");
  int64_t N = x->dims[0], C = x->dims[1], S = N > 0 && C > 0 ? x->n / (N * C) : 0;
  double *st = calloc((size_t)(4 * C + 1), sizeof *st); /* mean, invstd; the backward's two sums; the count */
  if (!st) return gx_fail(r, k, "out of memory");
  if (train) {
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t s = 0; s < S; s++) {
          double v = x->f[(n * C + c) * S + s];
          st[c] += v, st[C + c] += v * v;
        }
    double *cnt_p = st + 2 * C; /* the samples' elements per channel, summed with the statistics */
    *cnt_p = (double)N * (double)S;
    global_sum(r, st, 2 * C + 1);
    double cnt = *cnt_p;
    st[4 * C] = cnt;
    *cnt_p = 0;
    for (int64_t c = 0; c < C; c++) {
      double m = st[c] / cnt, var = st[C + c] / cnt - m * m;
      st[c] = m, st[C + c] = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    }
  } else {
    for (int64_t c = 0; c < C; c++) st[c] = IN(3)->f[c], st[C + c] = 1.0 / sqrt(IN(4)->f[c] + eps);
  }
  if (!bwd) {
    gx_tensor *y = OUT(0);
    if (!gx_alloc(y, false, x->rank, x->dims)) goto oom;
    for (int64_t e = 0; e < x->n; e++) {
      int64_t c = (e / S) % C;
      y->f[e] = (float)((x->f[e] - st[c]) * st[C + c]) * sc->f[c] + bi->f[c];
    }
    for (int o = 1; o < 3 && train && o < nd->n_out; o++) /* the running statistics, as ONNX updates them */
      if (nd->out[o] >= 0) {
        if (!gx_alloc(OUT(o), false, 1, (int64_t[]){C})) goto oom;
        for (int64_t c = 0; c < C; c++) {
          double b = o == 1 ? st[c] : 1.0 / (st[C + c] * st[C + c]) - eps;
          OUT(o)->f[c] = (float)(mom * IN(2 + o)->f[c] + (1 - mom) * b);
        }
      }
    free(st);
    return true;
  }
  const float *dy = r->grad[nd->out[0]];
  float *dx = gx_grad(r, nd->in[0]), *ds = gx_grad(r, nd->in[1]), *db = gx_grad(r, nd->in[2]);
  if (!dx || !ds || !db) goto oom;
  double *s1 = st + 2 * C, *s2 = st + 3 * C; /* Σ dy, Σ dy·x̂ per channel */
  for (int64_t e = 0; e < x->n; e++) {
    int64_t c = (e / S) % C;
    double xh = (x->f[e] - st[c]) * st[C + c];
    s1[c] += dy[e], s2[c] += dy[e] * xh;
  }
  for (int64_t c = 0; c < C; c++) ds[c] += (float)s2[c], db[c] += (float)s1[c];
  if (train) {
    global_sum(r, s1, 2 * C);
    double cnt = st[4 * C];
    for (int64_t e = 0; e < x->n; e++) {
      int64_t c = (e / S) % C;
      double xh = (x->f[e] - st[c]) * st[C + c];
      dx[e] += (float)(sc->f[c] * st[C + c] * (dy[e] - s1[c] / cnt - xh * s2[c] / cnt));
    }
  } else {
    for (int64_t e = 0; e < x->n; e++) {
      int64_t c = (e / S) % C;
      dx[e] += (float)(sc->f[c] * st[C + c] * dy[e]);
    }
  }
  free(st);
  return true;
oom:
  free(st);
  return gx_fail(r, k, "out of memory");
}

static bool layernorm(gx_run *r, int k, bool bwd) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *sc = IN(1);
  const gx_tensor *bi = HAS(2) ? IN(2) : NULL;
  int ax = gx_axis(gx_attr_i(nd->node, "axis", -1), x->rank);
  double eps = gx_attr_f(nd->node, "epsilon", 1e-5);
  int64_t D = 1;
  for (int d = ax; d < x->rank; d++) D *= x->dims[d];
  int64_t rows = D ? x->n / D : 0;
  if (sc->n != D || (bi && bi->n != D)) return gx_fail(r, k, "scale or bias is not of the normalised shape");
  gx_tensor *y = bwd ? NULL : OUT(0);
  if (y && !gx_alloc(y, false, x->rank, x->dims)) return gx_fail(r, k, "out of memory");
  const float *dy = bwd ? r->grad[nd->out[0]] : NULL;
  float *dx = bwd ? gx_grad(r, nd->in[0]) : NULL, *ds = bwd ? gx_grad(r, nd->in[1]) : NULL;
  float *db = bwd && bi ? gx_grad(r, nd->in[2]) : NULL;
  if (bwd && (!dx || !ds || (bi && !db))) return gx_fail(r, k, "out of memory");
  for (int64_t i = 0; i < rows; i++) {
    const float *p = x->f + i * D;
    double m = 0, v = 0;
    for (int64_t j = 0; j < D; j++) m += p[j];
    m /= (double)D;
    for (int64_t j = 0; j < D; j++) v += (p[j] - m) * (p[j] - m);
    double is = 1.0 / sqrt(v / (double)D + eps);
    if (!bwd) {
      for (int64_t j = 0; j < D; j++) y->f[i * D + j] = (float)((p[j] - m) * is) * sc->f[j] + (bi ? bi->f[j] : 0.0f);
      continue;
    }
    const float *g = dy + i * D;
    double a = 0, b = 0;
    for (int64_t j = 0; j < D; j++) {
      double xh = (p[j] - m) * is, gx = g[j] * sc->f[j];
      a += gx, b += gx * xh;
      ds[j] += (float)(g[j] * xh);
      if (db) db[j] += g[j];
    }
    for (int64_t j = 0; j < D; j++) {
      double xh = (p[j] - m) * is;
      dx[i * D + j] += (float)(is * (g[j] * sc->f[j] - a / (double)D - xh * b / (double)D));
    }
  }
  return true;
}

static bool pool(gx_run *r, int k, bool bwd) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  const gx_tensor *x = IN(0);
  bool global = strcmp(op, "GlobalAveragePool") == 0, mx = strcmp(op, "MaxPool") == 0;
  conv_geom g;
  int64_t ks[2] = {0, 0};
  if (global) {
    if (x->rank != 4) return gx_fail(r, k, "expected a 4-D input");
    ks[0] = x->dims[2], ks[1] = x->dims[3];
  } else if (gx_ints(r, k, "kernel_shape", 99, ks, 2) != 2) {
    return gx_fail(r, k, "expected a 2-D kernel_shape");
  }
  if (mx && nd->n_out > 1 && nd->out[1] >= 0) return gx_fail(r, k, "the Indices output is not run");
  if (global) {
    g = (conv_geom){.N = x->dims[0], .C = x->dims[1], .H = x->dims[2], .W = x->dims[3], .kh = ks[0], .kw = ks[1],
                    .OH = 1, .OW = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
  } else if (!geom(r, k, x, ks[0], ks[1], &g)) {
    return false;
  }
  bool incl = gx_attr_i(nd->node, "count_include_pad", 0);
  gx_tensor *y = bwd ? NULL : OUT(0);
  if (y && !gx_alloc(y, false, 4, (int64_t[]){g.N, g.C, g.OH, g.OW})) return gx_fail(r, k, "out of memory");
  const float *dy = bwd ? r->grad[nd->out[0]] : NULL;
  float *dx = bwd ? gx_grad(r, nd->in[0]) : NULL;
  if (bwd && !dx) return gx_fail(r, k, "out of memory");
  for (int64_t nc = 0; nc < g.N * g.C; nc++)
    for (int64_t oh = 0; oh < g.OH; oh++)
      for (int64_t ow = 0; ow < g.OW; ow++) {
        const float *p = x->f + nc * g.H * g.W;
        int64_t o = (nc * g.OH + oh) * g.OW + ow, arg = -1, cnt = 0;
        double acc = 0;
        float best = -INFINITY;
        for (int64_t i = 0; i < g.kh; i++)
          for (int64_t j = 0; j < g.kw; j++) {
            int64_t h = oh * g.sh - g.pt + i * g.dh, w = ow * g.sw - g.pl + j * g.dw;
            bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
            cnt += in || incl;
            if (!in) continue;
            float v = p[h * g.W + w];
            acc += v;
            if (v > best) best = v, arg = h * g.W + w;
          }
        if (!bwd) {
          y->f[o] = mx ? best : (float)(acc / (double)(cnt ? cnt : 1));
          continue;
        }
        if (mx) {
          if (arg >= 0) dx[nc * g.H * g.W + arg] += dy[o];
          continue;
        }
        float share = (float)(dy[o] / (double)(cnt ? cnt : 1));
        for (int64_t i = 0; i < g.kh; i++)
          for (int64_t j = 0; j < g.kw; j++) {
            int64_t h = oh * g.sh - g.pt + i * g.dh, w = ow * g.sw - g.pl + j * g.dw;
            if (h >= 0 && h < g.H && w >= 0 && w < g.W) dx[nc * g.H * g.W + h * g.W + w] += share;
          }
      }
  return true;
}

static bool nn(gx_run *r, int k, bool bwd) {
  const char *op = r->g->nodes[k].node->op_type;
  if (!strcmp(op, "Conv")) return conv(r, k, bwd);
  if (!strcmp(op, "BatchNormalization")) return batchnorm(r, k, bwd);
  if (!strcmp(op, "LayerNormalization")) return layernorm(r, k, bwd);
  if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool")) return pool(r, k, bwd);
  return gx_fail(r, k, "the graph executor does not run this op type");
}

bool gx_fwd_nn(gx_run *r, int k) { return nn(r, k, false); }
bool gx_bwd_nn(gx_run *r, int k) { return nn(r, k, true); }
