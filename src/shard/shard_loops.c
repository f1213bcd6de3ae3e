/* The loop structure of an op for op-level sharding (shard layer; shard.h describes the model): which dims of
 * its output are parallel loops, which contraction dims it adds, and which loop each dim of each operand and
 * of its weight belongs to. Per op kind:
 *  - matmul X[..., K]·W[K, N]: the output dims, plus K (a contraction); W is [K, N]. A product of two
 *    activations [..., M, K]·[..., K, N] maps the right operand's batch dims by alignment, K and N.
 *  - conv2d NCHW: N and C_out parallel, the spatial dims not splittable (a split needs halo exchange), C_in a
 *    contraction (not for grouped convolutions, whose channels follow the output's); W is [C_out, C_in, kh, kw].
 *  - pool: N and C; the spatial dims not splittable.
 *  - attention (core, Q/K/V [B, S, heads·d]): B, the query S (the keys' S is then whole) and the heads.
 *  - norm: every dim but the normalised one (the last, or N/H/W of a BatchNorm); its scale lies on the kept dim.
 *  - embedding: the output dims, plus the table's rows (a contraction: Megatron's VocabParallelEmbedding);
 *    the table is [rows, H].
 *  - loss: the logits' dims, all contractions into a scalar.
 *  - elementwise ops and the rest: the output dims; an ONNX op's operands map by its dim correspondence
 *    (graph.h in_dim, from the operator's semantics: src/model/onnx_dims.c) and the dims it needs whole are not
 *    split (whole_dims); views map by element offsets only (a dim starting at the same element offset as an
 *    output dim); ops of other sources by equal shape, broadcasting (right-aligned, size-1 dims unmapped),
 *    element offsets, and otherwise by equal sizes.
 *  - matmul batch dims, an embedding's indices and a norm's input (other sources) by broadcasting only.
 * Also: the names and parsing of specs, and a weight's spec in its stored order. */
#include <stdio.h>
#include <string.h>

#include "shard/shard.h"

const char *shard_dim_name(uint8_t mask) {
  static const char *const names[] = {"R", "S0", "S1", "S01"};
  return mask < 4 ? names[mask] : "?";
}

bool shard_spec_equal(const shard_spec *a, const shard_spec *b) {
  if (a->n_dims != b->n_dims) return false;
  for (int i = 0; i < a->n_dims; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

bool shard_spec_parse(const char *text, int n_dims, shard_spec *out) {
  memset(out, 0, sizeof *out);
  const char *p = text;
  int n = 0;
  while (*p) {
    if (n >= GRAPH_MAX_DIMS) return false;
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    uint8_t m;
    if (len == 1 && p[0] == 'R') m = 0;
    else if (len == 2 && p[0] == 'S' && p[1] == '0') m = 1;
    else if (len == 2 && p[0] == 'S' && p[1] == '1') m = 2;
    else if (len == 3 && (memcmp(p, "S01", 3) == 0 || memcmp(p, "S10", 3) == 0)) m = 3;
    else return false;
    out->dim[n++] = m;
    if (!end) break;
    p = end + 1;
    if (!*p) return false;
  }
  out->n_dims = (int8_t)n;
  return n == n_dims;
}

void shard_stored_weight_spec(const shard_strategy *s, const graph_weight *w, shard_spec *out) {
  memset(out, 0, sizeof *out);
  out->n_dims = (int8_t)w->n_dims;
  for (int d = 0; d < w->n_dims && d < GRAPH_MAX_DIMS; d++) {
    int l = w->logical[d];
    out->dim[d] = l >= 0 && l < s->weight.n_dims ? s->weight.dim[l] : 0;
  }
}

/* Concrete dims of a tensor at (b, s). */
static void dims_of(const graph_tensor *t, double b, double s, int64_t *d) {
  for (int i = 0; i < t->n_dims; i++) d[i] = (int64_t)graph_dim(t->dims[i], b, s);
}

/* How align may map an operand: by broadcasting only (matmuls, embeddings' indices), by broadcasting or element
 * offsets (views: a reshape moves no element, so a dim that starts at the same element offset as an output dim
 * and splits into the same contiguous chunks is that dim), or by any of those and then equal sizes (ops of op
 * graphs, whose sources state no dim correspondence). */
enum { ALIGN_BCAST, ALIGN_VIEW, ALIGN_ANY };

/* Maps the dims of operand x (rank nx) onto the loops of the output dims od (rank no): map[i] = loop or -1. */
static void align(const int64_t *xd, int nx, const int64_t *od, int no, int8_t *map, int mode) {
  for (int i = 0; i < nx; i++) map[i] = -1;
  bool ok = true;
  /* Equal shapes, or broadcasting: right-aligned, each dim equal or 1. */
  if (nx <= no) {
    for (int i = 0; i < nx && ok; i++) {
      int64_t a = xd[nx - 1 - i], o = od[no - 1 - i];
      if (a != o && a != 1) ok = false;
    }
    if (ok) {
      for (int i = 0; i < nx; i++)
        if (xd[i] != 1) map[i] = (int8_t)(no - nx + i);
      return;
    }
  }
  if (mode == ALIGN_BCAST) return;
  /* A reshape: the same number of elements, dims mapped where they start at the same element offset. */
  int64_t nxe = 1, noe = 1;
  for (int i = 0; i < nx; i++) nxe *= xd[i];
  for (int j = 0; j < no; j++) noe *= od[j];
  if (nxe == noe) {
    int64_t px = 1;
    int n_mapped = 0;
    for (int i = 0; i < nx; i++) {
      int64_t po = 1;
      for (int j = 0; j < no; j++) {
        if (po == px && xd[i] > 1 && od[j] > 1) {
          map[i] = (int8_t)j;
          n_mapped++;
          break;
        }
        po *= od[j];
      }
      px *= xd[i];
    }
    /* A split of input dim i into f chunks and of output dim j into f chunks cut the flat order at the same
     * places when both start after the same number of elements, so the mapping is exact (given that f divides
     * both, which operand_spec checks). Prefix alignment fails for transposes; an op graph's op may fall back to
     * matching sizes if it mapped little. */
    if (mode == ALIGN_VIEW || n_mapped >= nx - 1 || nx == 1) return;
    for (int i = 0; i < nx; i++) map[i] = -1;
  }
  if (mode != ALIGN_ANY) return;
  /* Equal sizes, each output dim used once, the same position first. */
  bool used[GRAPH_MAX_DIMS] = {false};
  for (int i = 0; i < nx; i++)
    if (i < no && xd[i] == od[i] && xd[i] > 1) {
      map[i] = (int8_t)i;
      used[i] = true;
    }
  for (int i = 0; i < nx; i++) {
    if (map[i] >= 0 || xd[i] <= 1) continue;
    for (int j = 0; j < no; j++)
      if (!used[j] && od[j] == xd[i]) {
        map[i] = (int8_t)j;
        used[j] = true;
        break;
      }
  }
}

static int add_loop(shard_loops *L, int64_t size, bool reduce) {
  if (L->n_loops >= SHARD_MAX_LOOPS) return -1;
  int l = L->n_loops++;
  L->size[l] = size;
  L->reduce[l] = reduce;
  L->splittable[l] = size > 1;
  return l;
}

void shard_op_loops(const graph_block *blk, const graph_op *op, double b, double s, shard_loops *L) {
  memset(L, 0, sizeof *L);
  memset(L->in_map, -1, sizeof L->in_map);
  memset(L->out_map, -1, sizeof L->out_map);
  memset(L->w_map, -1, sizeof L->w_map);
  L->k_loop = L->n_loop = L->cin_loop = L->head_loop = -1;
  const graph_tensor *out = &blk->tensors[op->out];
  int64_t od[GRAPH_MAX_DIMS], xd[GRAPH_MAX_DIMS];
  dims_of(out, b, s, od);
  int no = out->n_dims;
  int n_out = op->n_out > 0 ? op->n_out : 1;
  const graph_tensor *x0 = op->n_in > 0 ? &blk->tensors[op->in[0]] : NULL;

  if (op->kind == OP_LOSS && x0) {
    /* The logits' dims, each a contraction into the scalar loss. */
    dims_of(x0, b, s, xd);
    for (int i = 0; i < x0->n_dims; i++) {
      add_loop(L, xd[i], true);
      L->in_map[0][i] = (int8_t)i;
    }
    return;
  }
  for (int j = 0; j < no; j++) {
    add_loop(L, od[j], false);
    L->out_map[0][j] = (int8_t)j;
  }
  /* Other outputs (Split and the like): dims of the same size at the same place share the loop; a loop whose
   * size differs between outputs is not split. */
  for (int k = 1; k < n_out && k < OP_MAX_OUT; k++) {
    const graph_tensor *t = &blk->tensors[op->outs[k]];
    dims_of(t, b, s, xd);
    for (int j = 0; j < t->n_dims; j++) {
      if (j < no && xd[j] == od[j]) L->out_map[k][j] = (int8_t)j;
      else if (j < no) L->splittable[j] = false;
    }
  }
  switch (op->kind) {
  case OP_MATMUL:
  case OP_ROUTER: {
    if (!x0 || no < 1) break;
    dims_of(x0, b, s, xd);
    int nx = x0->n_dims;
    L->n_loop = (int8_t)(no - 1);
    L->k_loop = (int8_t)add_loop(L, op->weight_k, true);
    if (op->weight_is_input && op->n_in >= 2 && nx >= 2) {
      const graph_tensor *y = &blk->tensors[op->in[1]];
      int64_t yd[GRAPH_MAX_DIMS];
      dims_of(y, b, s, yd);
      int ny = y->n_dims;
      align(xd, nx - 1, od, no - 1, L->in_map[0], ALIGN_BCAST); /* batch dims and M */
      L->in_map[0][nx - 1] = L->k_loop;
      if (ny >= 2) {
        align(yd, ny - 2, od, no - 2, L->in_map[1], ALIGN_BCAST);
        L->in_map[1][ny - 2] = L->k_loop;
        L->in_map[1][ny - 1] = (int8_t)(no - 1);
      }
      L->n_loop = -1; /* N is an activation's dim here, not a weight's */
    } else {
      align(xd, nx - 1, od, no - 1, L->in_map[0], ALIGN_BCAST);
      L->in_map[0][nx - 1] = L->k_loop;
      L->w_dims = 2;
      L->w_shape[0] = op->weight_k;
      L->w_shape[1] = op->weight_n;
      L->w_map[0] = L->k_loop;
      L->w_map[1] = (int8_t)(no - 1);
    }
    /* Of the leading (batch-like) dims only the first is split (the second too for a product of two activations,
     * the heads of attention scores), unless it is 1: Alpa's dot strategies split one batch dim
     * (auto_sharding's enumeration for dot), and it keeps the problem at 16 strategies on a 2-axis mesh. */
    {
      int keep = op->weight_is_input ? 2 : 1, kept_n = 0;
      for (int j = 0; j < no - 1; j++) {
        if (L->splittable[j] && kept_n < keep) kept_n++;
        else L->splittable[j] = false;
      }
    }
    if (op->n_experts > 1)
      for (int l = 0; l < L->n_loops; l++) L->splittable[l] = false; /* expert routing: replicated here */
    break;
  }
  case OP_CONV2D:
  case OP_POOL: {
    if (!x0 || no < 2) break;
    dims_of(x0, b, s, xd);
    for (int j = 2; j < no; j++) L->splittable[j] = false;
    L->in_map[0][0] = 0;
    int64_t ks = op->kernel_h * op->kernel_w;
    bool dense = op->kind == OP_CONV2D && x0->n_dims >= 2 && op->weight_k == xd[1] * ks && op->gemm_flop_per_elem == 0;
    if (dense) {
      L->cin_loop = (int8_t)add_loop(L, xd[1], true);
      L->in_map[0][1] = L->cin_loop;
    } else if (x0->n_dims >= 2 && xd[1] == od[1]) {
      L->in_map[0][1] = 1; /* pooling, depthwise or grouped: the channels follow the output's */
    } else if (op->kind == OP_CONV2D) {
      L->splittable[1] = false;
    }
    if (op->kind == OP_CONV2D) {
      L->n_loop = 1;
      L->w_dims = 4;
      L->w_shape[0] = op->weight_n;
      L->w_shape[1] = ks > 0 ? op->weight_k / ks : op->weight_k;
      L->w_shape[2] = op->kernel_h;
      L->w_shape[3] = op->kernel_w;
      L->w_map[0] = 1;
      L->w_map[1] = dense ? L->cin_loop : -1;
      if (!dense) L->splittable[1] = false; /* a grouped convolution's channels: kept whole */
    }
    break;
  }
  case OP_ATTENTION: {
    /* Q/K/V/out [B, S, heads·d]: B, the query S and the heads; the keys' S is whole. */
    if (no != 3) {
      for (int l = 0; l < L->n_loops; l++) L->splittable[l] = l == 0;
      for (int i = 0; i < op->n_in; i++) L->in_map[i][0] = 0;
      break;
    }
    int64_t h = op->heads, g = op->kv_heads > 0 ? op->kv_heads : op->heads;
    while (g > 0) { /* gcd: a split of the heads must divide both the query and the KV heads */
      int64_t r = h % g;
      h = g;
      g = r;
    }
    L->size[2] = h;
    L->head_loop = 2;
    L->splittable[2] = h > 1;
    for (int i = 0; i < op->n_in && i < OP_MAX_IN; i++) {
      L->in_map[i][0] = 0;
      L->in_map[i][1] = i == 0 ? 1 : -1;
      L->in_map[i][2] = 2;
    }
    break;
  }
  case OP_NORM: {
    bool batchnorm = op->op_type && strcmp(op->op_type, "BatchNormalization") == 0;
    int kept = batchnorm ? 1 : no - 1;
    if (batchnorm) {
      for (int j = 2; j < no; j++) L->splittable[j] = false;
    } else if (no > 0) {
      L->splittable[no - 1] = false;
    }
    if (op->dims_known) {
      memcpy(L->in_map[0], op->in_dim[0], sizeof L->in_map[0]);
    } else if (x0) {
      dims_of(x0, b, s, xd);
      align(xd, x0->n_dims, od, no, L->in_map[0], ALIGN_BCAST);
    }
    if (op->extra_params > 0 && kept >= 0 && kept < no) {
      L->w_dims = 1;
      L->w_shape[0] = op->extra_params;
      L->w_map[0] = (int8_t)kept;
    }
    break;
  }
  case OP_EMBEDDING: {
    int64_t hdim = no > 0 ? od[no - 1] : 1;
    int64_t rows = hdim > 0 ? op->extra_params / hdim : 0;
    int rl = rows > 1 ? add_loop(L, rows, true) : -1;
    for (int i = 0; i < op->n_in && i < OP_MAX_IN; i++) {
      const graph_tensor *t = &blk->tensors[op->in[i]];
      dims_of(t, b, s, xd);
      if (t->n_dims < no) align(xd, t->n_dims, od, no - 1, L->in_map[i], ALIGN_BCAST); /* the indices: the output's leading dims */
    }
    if (op->extra_params > 0 && !op->tied) {
      L->w_dims = 2;
      L->w_shape[0] = rows;
      L->w_shape[1] = hdim;
      L->w_map[0] = (int8_t)rl;
      L->w_map[1] = (int8_t)(no - 1);
      if (rl >= 0) L->k_loop = (int8_t)rl;
    }
    break;
  }
  default: {
    for (int i = 0; i < op->n_in && i < OP_MAX_IN; i++) {
      if (op->dims_known) {
        memcpy(L->in_map[i], op->in_dim[i], sizeof L->in_map[i]);
        continue;
      }
      const graph_tensor *t = &blk->tensors[op->in[i]];
      dims_of(t, b, s, xd);
      align(xd, t->n_dims, od, no, L->in_map[i], op->is_view ? ALIGN_VIEW : ALIGN_ANY);
    }
    if (op->kind != OP_ELEMENTWISE)
      for (int l = 1; l < L->n_loops; l++) L->splittable[l] = false; /* routing ops: the batch dim only */
    if (op->extra_params > 0) {
      /* A bias or scale: on the last dim when it has that many elements, else kept whole. */
      L->w_dims = 1;
      L->w_shape[0] = op->extra_params;
      L->w_map[0] = no > 0 && od[no - 1] == op->extra_params ? (int8_t)(no - 1) : -1;
    }
    break;
  }
  }
  /* The dims the operator needs whole (a softmax's axis, a concatenated axis: graph.h whole_dims). */
  if (op->dims_known)
    for (int j = 0; j < no && j < GRAPH_MAX_DIMS; j++)
      if (op->whole_dims & (1u << j)) L->splittable[j] = false;
}
