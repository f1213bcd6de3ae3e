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

ap_status graph_build_edges(ap_ctx *ctx, arena *a, graph *g) {
  g->n_edges = 0;
  g->edges = NULL;
  int cap = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int oi = 0; oi < blk->n_ops; oi++) {
      const graph_op *op = &blk->ops[oi];
      for (int k = 0; k < op->n_in; k++) {
        int t = op->in[k], out_index = 0;
        int p = graph_producer(blk, t, &out_index);
        graph_edge e;
        if (p >= 0 && p != oi) {
          e = (graph_edge){.from_block = bi, .from_op = p, .from_out = out_index, .from_tensor = t};
        } else if (p < 0 && t == blk->input && outside_producer(g, bi, &e)) {
          /* handed over from the previous block, or from the previous repeat of this one */
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
