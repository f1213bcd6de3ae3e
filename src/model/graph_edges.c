/* The model graph's edges (model layer): which op produces each tensor that another op reads, within a block
 * and across blocks (graph.h, graph_edge). The builders (transformer, op-graph JSON, ONNX) describe ops by the
 * tensors they read and write; the edges make the producer → consumer structure explicit, so that a search
 * over per-op strategies can price the resharding on each edge (issue 12 point 2) without re-deriving it. */
#include <string.h>

#include "model/graph.h"

int graph_producer(const graph_block *blk, int t, int *out_index) {
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    int n = op->n_out > 0 ? op->n_out : 1;
    for (int k = 0; k < n; k++)
      if ((op->n_out > 0 ? op->outs[k] : op->out) == t) {
        if (out_index) *out_index = k;
        return i;
      }
  }
  return -1;
}

/* Appends one edge; returns false when out of memory. */
static bool push(arena *a, graph *g, int *cap, graph_edge e) {
  if (g->n_edges == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    graph_edge *ne = arena_alloc(a, sizeof *ne * (size_t)nc);
    if (!ne) return false;
    if (g->n_edges) memcpy(ne, g->edges, sizeof *ne * (size_t)g->n_edges);
    g->edges = ne;
    *cap = nc;
  }
  g->edges[g->n_edges++] = e;
  return true;
}

/* The producer of block bi's input tensor when it is not produced inside the block: the previous block's
 * output producer, or, for a repeated block, its own output producer (carried). Returns false when none. */
static bool outside_producer(const graph *g, int bi, graph_edge *e) {
  const graph_block *blk = &g->blocks[bi];
  if (blk->repeat > 1 && blk->output >= 0) {
    int k = 0, p = graph_producer(blk, blk->output, &k);
    if (p >= 0) {
      *e = (graph_edge){.from_block = bi, .from_op = p, .from_out = k, .from_tensor = blk->output, .carried = true};
      return true;
    }
  }
  if (bi > 0) {
    const graph_block *prev = &g->blocks[bi - 1];
    int k = 0, p = prev->output >= 0 ? graph_producer(prev, prev->output, &k) : -1;
    if (p >= 0) {
      *e = (graph_edge){.from_block = bi - 1, .from_op = p, .from_out = k, .from_tensor = prev->output};
      return true;
    }
  }
  return false;
}

/* Each tensor's producer in one block, indexed once (graph_producer scans the ops, so calling it per input
 * made edge building quadratic in ops: 200,000 ONNX nodes took minutes; issue 19, class 4). */
typedef struct {
  int *op, *out; /* per tensor: the producing op and its output index, -1 when none */
} prod_index;

static bool index_block(arena *a, const graph_block *blk, prod_index *ix) {
  size_t n = (size_t)(blk->n_tensors > 0 ? blk->n_tensors : 1);
  ix->op = arena_alloc(a, sizeof *ix->op * n);
  ix->out = arena_alloc(a, sizeof *ix->out * n);
  if (!ix->op || !ix->out) return false;
  for (size_t t = 0; t < n; t++) ix->op[t] = -1, ix->out[t] = 0;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    int nk = op->n_out > 0 ? op->n_out : 1;
    for (int k = 0; k < nk; k++) {
      int t = op->n_out > 0 ? op->outs[k] : op->out;
      if (t >= 0 && t < blk->n_tensors && ix->op[t] < 0) ix->op[t] = i, ix->out[t] = k; /* the first, as graph_producer */
    }
  }
  return true;
}

ap_status graph_build_edges(ap_ctx *ctx, arena *a, graph *g) {
  g->n_edges = 0;
  g->edges = NULL;
  int cap = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    prod_index ix;
    if (!index_block(a, blk, &ix)) return ctx_fail(ctx, AP_NOMEM, "out of memory building the graph's edges");
    /* The block's outside producer is the same for every op that reads its input: found once. */
    graph_edge outside;
    bool has_outside = blk->input >= 0 && outside_producer(g, bi, &outside);
    for (int oi = 0; oi < blk->n_ops; oi++) {
      const graph_op *op = &blk->ops[oi];
      for (int k = 0; k < op->n_in; k++) {
        int t = op->in[k], out_index = 0;
        int p = t >= 0 && t < blk->n_tensors ? ix.op[t] : -1;
        if (p >= 0) out_index = ix.out[t];
        graph_edge e;
        if (p >= 0 && p != oi) {
          e = (graph_edge){.from_block = bi, .from_op = p, .from_out = out_index, .from_tensor = t};
        } else if (p < 0 && t == blk->input && has_outside) {
          e = outside; /* handed over from the previous block, or from the previous repeat of this one */
        } else {
          continue;
        }
        e.to_block = bi;
        e.to_op = oi;
        e.to_in = k;
        e.to_tensor = t;
        if (!push(a, g, &cap, e)) return ctx_fail(ctx, AP_NOMEM, "out of memory building the graph's edges");
        /* A repeated block's first repeat reads the previous block's output, the later ones their own
         * previous repeat's: both edges exist. */
        if (e.carried && bi > 0) {
          graph_edge e2 = e;
          const graph_block *prev = &g->blocks[bi - 1];
          int k2 = 0, p2 = prev->output >= 0 ? graph_producer(prev, prev->output, &k2) : -1;
          if (p2 >= 0) {
            e2.from_block = bi - 1;
            e2.from_op = p2;
            e2.from_out = k2;
            e2.from_tensor = prev->output;
            e2.carried = false;
            if (!push(a, g, &cap, e2)) return ctx_fail(ctx, AP_NOMEM, "out of memory building the graph's edges");
          }
        }
      }
    }
  }
  return AP_OK;
}
