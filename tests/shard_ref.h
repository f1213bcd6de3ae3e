/* Serial reference kernels of ONNX operators for tests/test_shard_diff.c, in double precision, written from the
 * operators' definitions in the ONNX spec (onnx/docs/Operators.md at v1.14), independent of the sharding rules
 * they check. Each runs one node on whatever shapes its inputs have, so the same kernel runs the whole op
 * (serially) and each device's shard of it. Two things a shard needs beyond its inputs come in ref_node: the
 * global offset of each input's shard (an embedding whose table rows are split looks up only the ids of its own
 * rows and gives zeros elsewhere: Megatron-LM's VocabParallelEmbedding), and BatchNormalization's statistics
 * when the driver has all-reduced them over the devices that split N. Outputs are allocated here (malloc) and
 * freed by rt_free. */
#ifndef AP_TESTS_SHARD_REF_H
#define AP_TESTS_SHARD_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { RT_MAX_DIMS = 8, REF_MAX_IN = 8 };

typedef struct {
  int n;
  int64_t d[RT_MAX_DIMS];
  double *v;
} rt;

typedef struct {
  const char *op;                /* ONNX op_type */
  int64_t perm[RT_MAX_DIMS];     /* Transpose */
  int axis;                      /* Concat, Split, Softmax, Gather, LayerNormalization, Slice, ArgMax */
  unsigned axes;                 /* Reduce*: bit per dim */
  bool keepdims, trans_b;
  int64_t start, end;            /* Slice on `axis` */
  int n_out;                     /* Split */
  int64_t split[8];              /* Split: sizes along the axis (whole input) */
  int64_t kernel, pad;           /* Conv (square kernel, stride 1), MaxPool (kernel = stride) */
  double eps;
  int64_t off[REF_MAX_IN][RT_MAX_DIMS]; /* where each input's shard starts in the whole tensor */
  const double *bn_mean, *bn_var; /* BatchNormalization: the statistics over the whole batch, or NULL */
} ref_node;

static inline int64_t rt_numel(const rt *t) {
  int64_t n = 1;
  for (int i = 0; i < t->n; i++) n *= t->d[i];
  return n;
}

static inline rt rt_new(int n, const int64_t *d) {
  rt t = {.n = n};
  for (int i = 0; i < n; i++) t.d[i] = d[i];
  t.v = calloc((size_t)(rt_numel(&t) > 0 ? rt_numel(&t) : 1), sizeof(double));
  return t;
}

static inline void rt_free(rt *t) {
  free(t->v);
  t->v = NULL;
}

/* Row-major offset of index idx in shape d, with numpy broadcasting of a tensor of rank n into rank `rank`. */
static inline int64_t rt_bcast_at(const rt *t, const int64_t *idx, int rank) {
  int64_t o = 0;
  for (int i = 0; i < t->n; i++) {
    int j = rank - t->n + i;
    int64_t k = t->d[i] == 1 ? 0 : idx[j];
    o = o * t->d[i] + k;
  }
  return o;
}

static inline bool rt_next(int64_t *idx, const int64_t *d, int n) {
  for (int i = n - 1; i >= 0; i--) {
    if (++idx[i] < d[i]) return true;
    idx[i] = 0;
  }
  return false;
}

static inline int64_t rt_at(const int64_t *d, int n, const int64_t *idx) {
  int64_t o = 0;
  for (int i = 0; i < n; i++) o = o * d[i] + idx[i];
  return o;
}

static double ref_pointwise(const char *op, const double *x, int n) {
  if (strcmp(op, "Relu") == 0) return x[0] > 0 ? x[0] : 0;
  if (strcmp(op, "Add") == 0) return x[0] + x[1];
  if (strcmp(op, "Sub") == 0) return x[0] - x[1];
  if (strcmp(op, "Mul") == 0) return x[0] * x[1];
  if (strcmp(op, "Div") == 0) return x[0] / x[1];
  double r = x[0];
  for (int i = 1; i < n; i++) {
    if (strcmp(op, "Sum") == 0 || strcmp(op, "Mean") == 0) r += x[i];
    else if (strcmp(op, "Max") == 0) r = fmax(r, x[i]);
    else if (strcmp(op, "Min") == 0) r = fmin(r, x[i]);
  }
  return strcmp(op, "Mean") == 0 ? r / n : r;
}

/* Runs node nd on in[0 .. n_in-1] (ONNX input order); writes out[0 .. ] and returns the number of outputs, or
 * -1 when the op is not one of these kernels' or its inputs do not fit it. `want` is the shape the caller
 * expects of output 0 (Reshape's target, taken from it where the element counts agree). */
static int ref_run(const ref_node *nd, const rt *in, int n_in, const rt *want, rt *out) {
  const char *op = nd->op;
  const rt *x = &in[0];
  int64_t idx[RT_MAX_DIMS] = {0};
  static const char *const bc[] = {"Relu", "Add", "Sub", "Mul", "Div", "Sum", "Mean", "Max", "Min", NULL};
  for (const char *const *p = bc; *p; p++) {
    if (strcmp(op, *p) != 0) continue;
    int rank = 0;
    int64_t d[RT_MAX_DIMS];
    for (int i = 0; i < n_in; i++) rank = in[i].n > rank ? in[i].n : rank;
    for (int j = 0; j < rank; j++) d[j] = 1;
    for (int i = 0; i < n_in; i++)
      for (int k = 0; k < in[i].n; k++) {
        int j = rank - in[i].n + k;
        if (in[i].d[k] != 1) {
          if (d[j] != 1 && d[j] != in[i].d[k]) return -1;
          d[j] = in[i].d[k];
        }
      }
    out[0] = rt_new(rank, d);
    int64_t o = 0;
    do {
      double a[REF_MAX_IN];
      for (int i = 0; i < n_in; i++) a[i] = in[i].v[rt_bcast_at(&in[i], idx, rank)];
      out[0].v[o++] = ref_pointwise(op, a, n_in);
    } while (rt_next(idx, d, rank));
    return 1;
  }
  if (strcmp(op, "Transpose") == 0) {
    int64_t d[RT_MAX_DIMS], src[RT_MAX_DIMS];
    for (int j = 0; j < x->n; j++) d[j] = x->d[nd->perm[j]];
    out[0] = rt_new(x->n, d);
    int64_t o = 0;
    do {
      for (int j = 0; j < x->n; j++) src[nd->perm[j]] = idx[j];
      out[0].v[o++] = x->v[rt_at(x->d, x->n, src)];
    } while (rt_next(idx, d, x->n));
    return 1;
  }
  if (strcmp(op, "Reshape") == 0) {
    if (rt_numel(want) != rt_numel(x)) return -1;
    out[0] = rt_new(want->n, want->d);
    memcpy(out[0].v, x->v, sizeof(double) * (size_t)rt_numel(x));
    return 1;
  }
  if (strcmp(op, "Concat") == 0) {
    int64_t d[RT_MAX_DIMS];
    memcpy(d, x->d, sizeof d);
    d[nd->axis] = 0;
    for (int i = 0; i < n_in; i++) d[nd->axis] += in[i].d[nd->axis];
    out[0] = rt_new(x->n, d);
    int64_t o = 0;
    do {
      int64_t k = idx[nd->axis], src[RT_MAX_DIMS];
      int i = 0;
      while (k >= in[i].d[nd->axis]) k -= in[i].d[nd->axis], i++;
      memcpy(src, idx, sizeof src);
      src[nd->axis] = k;
      out[0].v[o++] = in[i].v[rt_at(in[i].d, in[i].n, src)];
    } while (rt_next(idx, d, x->n));
    return 1;
  }
  if (strcmp(op, "Split") == 0 || strcmp(op, "Slice") == 0) {
    int n = strcmp(op, "Split") == 0 ? nd->n_out : 1;
    int64_t at = strcmp(op, "Split") == 0 ? 0 : nd->start, total = 0;
    for (int k = 0; k < n; k++) total += strcmp(op, "Split") == 0 ? nd->split[k] : nd->end - nd->start;
    if (strcmp(op, "Split") == 0 && total != x->d[nd->axis]) return -1;
    for (int k = 0; k < n; k++) {
      int64_t d[RT_MAX_DIMS], len = strcmp(op, "Split") == 0 ? nd->split[k] : nd->end - nd->start;
      memcpy(d, x->d, sizeof d);
      d[nd->axis] = len;
      out[k] = rt_new(x->n, d);
      memset(idx, 0, sizeof idx);
      int64_t o = 0;
      do {
        int64_t src[RT_MAX_DIMS];
        memcpy(src, idx, sizeof src);
        src[nd->axis] += at;
        out[k].v[o++] = x->v[rt_at(x->d, x->n, src)];
      } while (rt_next(idx, d, x->n));
      at += len;
    }
    return n;
  }
  if (strcmp(op, "Softmax") == 0 || strcmp(op, "LayerNormalization") == 0) {
    out[0] = rt_new(x->n, x->d);
    int a = nd->axis;
    int64_t inner = 1, outer = 1, len = x->d[a];
    for (int i = a + 1; i < x->n; i++) inner *= x->d[i];
    for (int i = 0; i < a; i++) outer *= x->d[i];
    if (strcmp(op, "LayerNormalization") == 0) len *= inner, inner = 1; /* every dim from the axis on */
    for (int64_t o = 0; o < outer; o++)
      for (int64_t r = 0; r < inner; r++) {
        const double *p = x->v + o * len * inner + r;
        double *q = out[0].v + o * len * inner + r;
        if (strcmp(op, "Softmax") == 0) {
          double m = -INFINITY, s = 0;
          for (int64_t k = 0; k < len; k++) m = fmax(m, p[k * inner]);
          for (int64_t k = 0; k < len; k++) s += exp(p[k * inner] - m);
          for (int64_t k = 0; k < len; k++) q[k * inner] = exp(p[k * inner] - m) / s;
        } else {
          double mu = 0, var = 0;
          for (int64_t k = 0; k < len; k++) mu += p[k];
          mu /= (double)len;
          for (int64_t k = 0; k < len; k++) var += (p[k] - mu) * (p[k] - mu);
          var /= (double)len;
          for (int64_t k = 0; k < len; k++)
            q[k] = (p[k] - mu) / sqrt(var + nd->eps) * in[1].v[k % in[1].d[in[1].n - 1]] + in[2].v[k % in[2].d[in[2].n - 1]];
        }
      }
    return 1;
  }
  if (strcmp(op, "Gather") == 0) {
    /* data in[0], indices in[1] (integer-valued doubles); a row outside this shard of the data gives 0 */
    const rt *ind = &in[1];
    int a = nd->axis, r = 0;
    int64_t d[RT_MAX_DIMS];
    for (int i = 0; i < a; i++) d[r++] = x->d[i];
    for (int i = 0; i < ind->n; i++) d[r++] = ind->d[i];
    for (int i = a + 1; i < x->n; i++) d[r++] = x->d[i];
    out[0] = rt_new(r, d);
    int64_t o = 0;
    do {
      int64_t src[RT_MAX_DIMS], iidx[RT_MAX_DIMS];
      for (int i = 0; i < a; i++) src[i] = idx[i];
      for (int i = 0; i < ind->n; i++) iidx[i] = idx[a + i];
      int64_t row = (int64_t)ind->v[rt_at(ind->d, ind->n, iidx)] - nd->off[0][a];
      for (int i = a + 1; i < x->n; i++) src[i] = idx[i - 1 + ind->n];
      src[a] = row;
      out[0].v[o++] = row >= 0 && row < x->d[a] ? x->v[rt_at(x->d, x->n, src)] : 0;
    } while (rt_next(idx, d, r));
    return 1;
  }
  if (strcmp(op, "MatMul") == 0 || strcmp(op, "Gemm") == 0) {
    const rt *y = &in[1];
    bool tb = strcmp(op, "Gemm") == 0 && nd->trans_b;
    int64_t K = x->d[x->n - 1], N = tb ? y->d[0] : y->d[y->n - 1];
    if ((tb ? y->d[1] : y->d[y->n - 2]) != K) return -1;
    int rank = x->n > y->n ? x->n : y->n;
    int64_t d[RT_MAX_DIMS];
    for (int j = 0; j < rank - 2; j++) {
      int jx = j - (rank - x->n), jy = j - (rank - y->n);
      int64_t a = jx >= 0 ? x->d[jx] : 1, b = jy >= 0 ? y->d[jy] : 1;
      if (a != b && a != 1 && b != 1) return -1;
      d[j] = a > b ? a : b;
    }
    d[rank - 2] = x->d[x->n - 2];
    d[rank - 1] = N;
    out[0] = rt_new(rank, d);
    int64_t o = 0;
    do {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        int64_t ix[RT_MAX_DIMS], iy[RT_MAX_DIMS];
        memcpy(ix, idx, sizeof ix);
        memcpy(iy, idx, sizeof iy);
        ix[rank - 1] = k;
        iy[rank - 2] = tb ? idx[rank - 1] : k;
        iy[rank - 1] = tb ? k : idx[rank - 1];
        s += x->v[rt_bcast_at(x, ix, rank)] * y->v[rt_bcast_at(y, iy, rank)];
      }
      if (n_in > 2) s += in[2].v[idx[rank - 1] % in[2].d[in[2].n - 1]];
      out[0].v[o++] = s;
    } while (rt_next(idx, d, rank));
    return 1;
  }
  if (strcmp(op, "Conv") == 0 || strcmp(op, "MaxPool") == 0) {
    bool conv = strcmp(op, "Conv") == 0;
    const rt *w = &in[1];
    int64_t k = nd->kernel, p = conv ? nd->pad : 0, st = conv ? 1 : k;
    int64_t C = conv ? w->d[0] : x->d[1], Ho = (x->d[2] + 2 * p - k) / st + 1, Wo = (x->d[3] + 2 * p - k) / st + 1;
    out[0] = rt_new(4, (int64_t[]){x->d[0], C, Ho, Wo});
    int64_t o = 0;
    do {
      int64_t n = idx[0], c = idx[1], h = idx[2], ww = idx[3];
      double s = conv ? (n_in > 2 ? in[2].v[c] : 0) : -INFINITY;
      for (int64_t ci = 0; ci < (conv ? x->d[1] : 1); ci++)
        for (int64_t i = 0; i < k; i++)
          for (int64_t j = 0; j < k; j++) {
            int64_t hi = h * st + i - p, wi = ww * st + j - p;
            if (hi < 0 || wi < 0 || hi >= x->d[2] || wi >= x->d[3]) continue;
            if (conv)
              s += x->v[((n * x->d[1] + ci) * x->d[2] + hi) * x->d[3] + wi] * w->v[((c * w->d[1] + ci) * k + i) * k + j];
            else
              s = fmax(s, x->v[((n * x->d[1] + c) * x->d[2] + hi) * x->d[3] + wi]);
          }
      out[0].v[o++] = s;
    } while (rt_next(idx, out[0].d, 4));
    return 1;
  }
  if (strcmp(op, "BatchNormalization") == 0) {
    /* training mode: the batch's statistics over N, H, W per channel (nd->bn_mean/var when all-reduced) */
    out[0] = rt_new(x->n, x->d);
    int64_t N = x->d[0], C = x->d[1], HW = rt_numel(x) / (N * C);
    for (int64_t c = 0; c < C; c++) {
      double mu = 0, var = 0;
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++) mu += x->v[(n * C + c) * HW + i];
      mu /= (double)(N * HW);
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++) var += pow(x->v[(n * C + c) * HW + i] - mu, 2);
      var /= (double)(N * HW);
      if (nd->bn_mean) mu = nd->bn_mean[c], var = nd->bn_var[c];
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++) {
          int64_t at = (n * C + c) * HW + i;
          out[0].v[at] = (x->v[at] - mu) / sqrt(var + nd->eps) * in[1].v[c] + in[2].v[c];
        }
    }
    return 1;
  }
  if (strncmp(op, "Reduce", 6) == 0) {
    int64_t d[RT_MAX_DIMS], kd[RT_MAX_DIMS];
    int r = 0;
    for (int i = 0; i < x->n; i++) {
      kd[i] = nd->axes & (1u << i) ? 1 : x->d[i];
      if (!(nd->axes & (1u << i)) || nd->keepdims) d[r++] = kd[i];
    }
    out[0] = rt_new(r, d);
    double cnt = (double)rt_numel(x) / (double)rt_numel(&out[0]);
    do {
      int64_t ko[RT_MAX_DIMS];
      for (int i = 0; i < x->n; i++) ko[i] = nd->axes & (1u << i) ? 0 : idx[i];
      double v = x->v[rt_at(x->d, x->n, idx)];
      out[0].v[rt_at(kd, x->n, ko)] += strcmp(op, "ReduceMean") == 0 ? v / cnt : v;
    } while (rt_next(idx, x->d, x->n));
    return 1;
  }
  return -1;
}

#endif
