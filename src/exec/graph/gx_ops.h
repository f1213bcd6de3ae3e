/* The graph runtime's helpers that its forward (gx_fwd.c), backward (gx_bwd.c) and neural-network ops
 * (gx_nn.c) share: the index maps of the view ops and the attribute-or-input lists of opset 13.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_GX_OPS_H
#define AP_EXEC_GX_OPS_H

#include "exec/graph/gx.h"

AP_HIDDEN int gx_axis(int64_t a, int rank);
AP_HIDDEN int gx_ints_in(gx_run *r, int k, int i, int64_t *out, int cap);
AP_HIDDEN int gx_ints(gx_run *r, int k, const char *name, int i, int64_t *out, int cap);
AP_HIDDEN void gx_softmax_span(const gx_run *r, const gx_node *nd, const gx_tensor *x, int64_t *outer, int64_t *len,
                               int64_t *inner);
AP_HIDDEN bool gx_reduce_axes(gx_run *r, int k, const gx_tensor *x, bool *mask);
AP_HIDDEN int gx_split_sizes(gx_run *r, int k, const gx_tensor *x, int ax, int64_t *sz);
AP_HIDDEN bool gx_slice_params(gx_run *r, int k, const gx_tensor *x, int64_t *start, int64_t *step, int64_t *dims);
AP_HIDDEN int64_t gx_slice_index(const gx_tensor *x, const int64_t *start, const int64_t *step, const int64_t *dims,
                                 int64_t e);
/* Conv, BatchNormalization, LayerNormalization and the pools (gx_nn.c). */
AP_HIDDEN bool gx_fwd_nn(gx_run *r, int k);
AP_HIDDEN bool gx_bwd_nn(gx_run *r, int k);

#endif
