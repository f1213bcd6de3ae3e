/* The model graph: the first of autopar's four nouns (DESIGN.md "The four nouns").
 *
 * A graph is a list of blocks (an embedding, a transformer layer, a head …), each with a repeat count, so a
 * 96-layer model is one layer block repeated 96 times. A block holds tensors and the ops between them. Shapes
 * are symbolic in the micro-batch size B and the sequence length S (negative dimension codes below), so one
 * graph serves every plan: the cost model evaluates an op at concrete (b, s) in a few multiplications.
 *
 * What an op knows (DESIGN.md): kind, input/output tensors (shapes, dtypes), parameter count, forward FLOP,
 * backward FLOP split into input-gradient (dgrad) and weight-gradient (wgrad), bytes read and written, and the
 * tensors it saves for backward. Saved tensors are recorded per block as a set, so a tensor saved by two ops
 * (a LayerNorm output feeding Q, K and V projections) is counted once, as in Korthikanti et al. 2022 §4.1.
 *
 * Tensor-parallel annotation: each tensor says which of its dimensions Megatron-style tensor parallelism
 * splits (heads or FFN columns), or none; sequence parallelism then splits the S dimension of the tensors
 * that tensor parallelism leaves whole (Korthikanti et al. 2022 §4.2.2). Each weight says whether it is split.
 * These are facts about the layer's structure that the cost model uses; the plan decides the degrees.
 */
#ifndef AP_MODEL_GRAPH_H
#define AP_MODEL_GRAPH_H

#include "core/core.h"

/* Symbolic dimensions: a dimension value > 0 is literal; these negative codes stand for plan variables. */
enum { DIM_B = -1, /* micro-batch size, sequences */ DIM_S = -2 /* sequence length, tokens */ };
enum { GRAPH_MAX_DIMS = 6 };

#define DTYPE_MAP(X)  \
  X(FP32, "fp32", 4)  \
  X(TF32, "tf32", 4)  \
  X(BF16, "bf16", 2)  \
  X(FP16, "fp16", 2)  \
  X(FP8, "fp8", 1)    \
  X(FP4, "fp4", 1)    \
  X(INT64, "int64", 8) \
  X(INT32, "int32", 4) \
  X(U8, "u8", 1)      \
  X(FP64, "fp64", 8)  \
  X(INT16, "int16", 2)

typedef enum {
#define X(e, s, n) DT_##e,
  DTYPE_MAP(X)
#undef X
  DT_COUNT_
} dtype;

AP_HIDDEN const char *dtype_name(dtype dt);
AP_HIDDEN size_t dtype_bytes(dtype dt);
/* Returns false when the name is unknown. */
AP_HIDDEN bool dtype_parse(const char *name, dtype *out);

/* Op kinds. FLOP rules per kind live in graph.c (graph_op_eval); each cites its source. */
#define OP_KIND_MAP(X)                                                                       \
  X(MATMUL, "matmul")             /* X[..., K] · W[K, N]; optional expert copies */          \
  X(ATTENTION, "attention")       /* core attention: softmax(Q Kᵀ) V, no projections */      \
  X(NORM, "norm")                 /* LayerNorm / RMSNorm over the last dimension */          \
  X(ELEMENTWISE, "elementwise")   /* activation, add, dropout, rotary, gating */             \
  X(EMBEDDING, "embedding")       /* table lookup [rows, dim] */                             \
  X(ROUTER, "router")             /* MoE router: X · W[h, E], softmax, top-k */              \
  X(DISPATCH, "dispatch")         /* MoE token permutation (all-to-all under EP) */          \
  X(COMBINE, "combine")           /* MoE weighted un-permutation */                          \
  X(LOSS, "loss")                 /* softmax cross-entropy over the last dimension */        \
  X(CONV2D, "conv2d")             /* NCHW convolution, for general graphs */                 \
  X(POOL, "pool")                 /* pooling, for general graphs */

typedef enum {
#define X(e, s) OP_##e,
  OP_KIND_MAP(X)
#undef X
  OP_KIND_COUNT_
} op_kind;

AP_HIDDEN const char *op_kind_name(op_kind k);
AP_HIDDEN bool op_kind_parse(const char *name, op_kind *out);

typedef struct {
  const char *name;
  int n_dims;
  int64_t dims[GRAPH_MAX_DIMS]; /* > 0 literal, or DIM_B / DIM_S */
  dtype dt;
  int tp_dim; /* dimension split by tensor parallelism, or -1 when TP leaves the tensor whole */
  bool seq_parallel; /* true when sequence parallelism may split its S dimension (TP leaves it whole) */
} graph_tensor;

/* OP_MAX_IN: an n-ary op's activation inputs (a DenseNet-201 Concat joins 49 feature maps; Sum, Max, Min, Mean
 * take any number). */
enum { OP_MAX_IN = 64, OP_MAX_SAVED = 6, OP_MAX_OUT = 8, OP_MAX_WEIGHTS = 5 };

/* One weight of an op as its source file stores it (an ONNX initializer the op reads): its name, its dims in
 * the stored order, and for each stored dim the dim of the op's logical weight it is (the [k, n] of a matmul,
 * [C_out, C_in, kh, kw] of a convolution, [rows, H] of an embedding, [n] of a norm's scale or a bias: the
 * order the sharding layer splits, src/shard/shard_loops.c), or -1 for a dim no split reaches. So a Gemm with
 * transB = 1, which stores its weight [n, k], has logical {1, 0}. */
typedef struct {
  const char *name;
  int n_dims;
  int64_t dims[GRAPH_MAX_DIMS];
  int8_t logical[GRAPH_MAX_DIMS];
  /* A packed weight read in parts (n_parts > 1; the ONNX importer's packed projections, onnx_packed.c): the op's
   * logical weight is part `part` of n_parts equal contiguous parts of stored dim part_dim (the query, key or
   * value columns of a fused QKV weight), and its spec splits that part. */
  int8_t part_dim;
  int16_t part, n_parts;
} graph_weight;

typedef struct {
  const char *name;
  op_kind kind;
  int n_in;
  int in[OP_MAX_IN]; /* tensor indices within the block */
  int out;           /* output tensor index */
  /* Tensors this op keeps for its backward pass (indices), and bytes of masks it keeps (e.g. dropout
   * masks, 1 byte per element of the tensor named by mask_of, or -1 for none). */
  int n_saved;
  int saved[OP_MAX_SAVED];
  int mask_of;
  /* Weights. For MATMUL/ROUTER: the weight is [k, n] with optional bias [n]; n_experts copies for routed
   * experts, of which each token uses top_k (the input then has a literal top_k dimension). */
  int64_t weight_k, weight_n;
  bool has_bias;
  int64_t n_experts; /* 1 for a dense op */
  int64_t top_k;     /* experts each token uses; 1 for a dense op */
  int64_t extra_params; /* other parameters of the op (norm scales, embedding tables, attention sinks) */
  bool tp_split;        /* its parameters are split by tensor parallelism */
  bool tied;            /* shares its weight with an earlier op (tied LM head): params not counted again */
  /* ATTENTION: heads, KV heads, head dims of Q/K and V, whether causal (the FLOP count does not discount
   * the mask; the flag is for conventions that do), sliding window (0 = none). */
  int64_t heads, kv_heads, head_dim_qk, head_dim_v, window;
  bool causal;
  /* CONV2D/POOL: kernel size; FLOP follow from the output shape. */
  int64_t kernel_h, kernel_w;
  /* ELEMENTWISE/NORM: FLOP per output element in the forward pass (documented per builder). */
  double flop_per_elem;
  /* General-graph additions (filled by the ONNX importer; neutral defaults keep the older builders' ops
   * unchanged). Every output of the op: outs[0] == out, n_out >= 1 once the op is added (graph_op_add sets
   * n_out = 1 for an op that names only out; an op assembled by hand with n_out 0 means out alone). */
  int n_out;
  int outs[OP_MAX_OUT];
  /* MATMUL: the right operand is the op's second input, an activation (a batched matmul such as Q·Kᵀ), not
   * a weight: no parameters, and the backward pass computes two input gradients and no weight gradient. */
  bool weight_is_input;
  /* CONV2D: forward FLOP per output element when it is not 2·weight_k (a transposed convolution, whose
   * work scales with its input); 0 = 2·weight_k. */
  double gemm_flop_per_elem;
  /* A view (reshape, squeeze, flatten): no data moves, so no bytes are read or written. */
  bool is_view;
  /* The source operator type (an ONNX op_type such as "Conv"), or NULL. */
  const char *op_type;
  /* The weights as stored (ONNX initializers read directly, in input order; 0 for ops of other sources, whose
   * weights have only the logical form). The first is the op's main weight. */
  int n_weights;
  graph_weight weights[OP_MAX_WEIGHTS];
  /* Dim correspondence, from the operator's semantics (the ONNX importer, src/model/onnx_dims.c; dims_known
   * false for ops of other sources and for matmuls, convolutions, pools, losses, embeddings and views, which the
   * sharding layer maps by kind and shape): in_dim[i][d] is the dim of the op's first output that dim d of
   * activation input i is, element for element, so that a split of that output dim into contiguous chunks
   * is the same split of the input dim (a Transpose's perm, the kept dims of a Concat, Slice, Gather or
   * reduction, broadcasting); -1 where it is none (a concatenated, sliced, gathered, reduced or broadcast dim,
   * which the op reads whole). whole_dims bit j: output dim j must not be split at all, because each of its
   * elements depends on the whole of the dim (a softmax's or normalisation's axis, a concatenated axis, the
   * position-dependent mask of Trilu). */
  bool dims_known;
  uint8_t whole_dims;
  /* A part q > 0 of a packed projection (onnx_packed.c): the index of part 0 in the block, plus one; 0 for every
   * other op. The parts share one strategy (the search ties them), so the gradients of their common input are
   * summed locally and reduced once, by part 0 (Megatron's fused QKV: one all-reduce of the input's gradient). */
  int packed_with;
  int8_t in_dim[OP_MAX_IN][GRAPH_MAX_DIMS];
} graph_op;

typedef enum { BLOCK_EMBED, BLOCK_LAYER, BLOCK_HEAD, BLOCK_OTHER } block_role;

typedef struct {
  const char *name;
  block_role role;
  int64_t repeat;
  int n_tensors, n_ops;
  graph_tensor *tensors;
  graph_op *ops;
  int input, output; /* tensor indices of the block's input and output activations (-1 if none) */
  bool is_moe;
} graph_block;

/* What a training framework needs to build the same architecture but the cost model does not read (the
 * exporters do, src/plan/export_*.c): position-encoding constants, norm epsilon, dropout, activation, the
 * MoE router's rule and multi-token prediction. The Hugging Face reader fills it from config.json
 * (hfconfig.c, transformers' field names); `stated` is false for op graphs, whose source says none of it. */
typedef enum { ARCH_ROPE_NONE, ARCH_ROPE_LLAMA3, ARCH_ROPE_YARN, ARCH_ROPE_LINEAR, ARCH_ROPE_OTHER } arch_rope_scaling;
typedef enum { ARCH_ACT_UNKNOWN, ARCH_ACT_SILU, ARCH_ACT_GELU, ARCH_ACT_GELU_TANH, ARCH_ACT_RELU, ARCH_ACT_OTHER } arch_act;
typedef enum { ARCH_ROUTER_SOFTMAX, ARCH_ROUTER_SIGMOID } arch_router;
typedef struct {
  bool stated;
  double rope_theta; /* 0 when the config gives none */
  arch_rope_scaling rope_scaling;
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* rope_scaling's fields; 0 when absent */
  double rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim;
  int64_t rope_original_max_pos;
  int64_t max_pos;      /* max_position_embeddings */
  double norm_eps;      /* 0 when not stated */
  double attention_dropout, hidden_dropout; /* probabilities; 0 for the modern configs that state none */
  arch_act act;
  int64_t mtp_layers;   /* DeepSeek-V3 num_nextn_predict_layers */
  int64_t mla_qk_rope_dim; /* MLA: the rotary part of each q/k head (qk_rope_head_dim) */
  arch_router router;   /* scoring_func */
  bool norm_topk_prob;  /* renormalise the top-k routing weights */
  double routed_scaling_factor; /* 0 when not stated */
  int64_t n_group, topk_group;  /* group-limited routing; 0 when not stated */
  double router_aux_loss_coef;  /* -1 when not stated */
} graph_arch;

/* An edge of the graph: the tensor that one op produces and another reads. Within a block, the producer's
 * output outs[from_out] is the consumer's input in[to_in] (tensor indices of that block). Between blocks, the
 * producer's block hands its output tensor to the next block's input tensor: the edge links the op that
 * produces one to each op that reads the other. A block repeated more than once also hands its output to its
 * own input (carried: from one repeat to the next). Tensors that no op produces (graph inputs, labels) have no
 * edges in. */
typedef struct {
  int from_block, from_op, from_out; /* producer: block, op index in it, output index in its outs */
  int from_tensor;                   /* the tensor in the producer's block */
  int to_block, to_op, to_in;        /* consumer: block, op index in it, input index in its in */
  int to_tensor;                     /* the tensor in the consumer's block (from_tensor when in one block) */
  bool carried;                      /* from one repeat of a block to its next repeat */
} graph_edge;

/* The whole model. Owned by an arena; freed with it. */
typedef struct {
  const char *name;
  const char *model_type; /* "llama", "deepseek_v3", "graph" … */
  const char *source;     /* where the architecture came from */
  int n_blocks;
  graph_block *blocks;
  int64_t default_seq; /* the sequence length a plan that states none trains at, tokens */
  const char *default_seq_from; /* where default_seq comes from, a phrase for the assumption printed with every
                                 * answer that uses it ("its pretraining context: max_position_embeddings of its
                                 * config"); "" when the source states it (op graphs' default_seq) */
  int64_t vocab_size, hidden_size, n_layers; /* summary facts; 0 where they do not apply */
  bool causal_lm;
  graph_arch arch;
  /* Producer → consumer edges (graph_build_edges), ordered by consumer block, op and input. */
  int n_edges;
  graph_edge *edges;
} graph;

/* Costs of one op, or one block, at concrete micro-batch b and sequence s (one pass of the layer). FLOP
 * are multiply-adds × 2. "gemm" FLOP count matmul-like work (matmuls, attention core); "vector" FLOP the
 * rest (norms, activations, softmax). Bytes are the op's minimum traffic to device memory. */
typedef struct {
  double fwd_gemm_flop, fwd_vector_flop;
  double dgrad_flop; /* backward, gradient with respect to inputs (gemm + vector) */
  double wgrad_flop; /* backward, gradient with respect to weights */
  double bwd_gemm_flop; /* the gemm part of dgrad + wgrad */
  double read_bytes, write_bytes;
  double attn_quadratic_flop; /* the part of fwd_gemm_flop that scales with S² (causal-discount conventions) */
} op_cost;

/* Resolves a symbolic dimension. */
static inline double graph_dim(int64_t d, double b, double s) {
  return d == DIM_B ? b : d == DIM_S ? s : (double)d;
}
AP_HIDDEN double graph_tensor_numel(const graph_tensor *t, double b, double s);
AP_HIDDEN double graph_tensor_bytes(const graph_tensor *t, double b, double s);

/* FLOP and bytes of one op at (b, s). */
AP_HIDDEN op_cost graph_op_eval(const graph_block *blk, const graph_op *op, double b, double s);
/* Sum over the block's ops (one repeat). */
AP_HIDDEN op_cost graph_block_eval(const graph_block *blk, double b, double s);
/* Bytes of activations the block saves for backward per micro-batch at (b, s), each saved tensor once. */
AP_HIDDEN double graph_block_saved_bytes(const graph_block *blk, double b, double s);

/* Parameter counts of one op / one block repeat / the whole graph. "active" counts top_k of n_experts. */
AP_HIDDEN int64_t graph_op_params(const graph_op *op);
AP_HIDDEN int64_t graph_op_params_active(const graph_op *op);
AP_HIDDEN int64_t graph_block_params(const graph_block *blk);
AP_HIDDEN int64_t graph_block_params_active(const graph_block *blk);
AP_HIDDEN int64_t graph_params_total(const graph *g);
AP_HIDDEN int64_t graph_params_active(const graph *g);

/* Training FLOP of one sequence at length s summed over the graph (forward + dgrad + wgrad), gemm only or
 * all; per token divide by s. */
AP_HIDDEN double graph_train_flop_per_seq(const graph *g, double s, bool gemm_only);

/* ---- Building graphs (used by the transformer builder and the JSON graph reader) ---- */
typedef struct {
  arena *a;
  ap_ctx *ctx;
  graph_block *blk;
  int cap_tensors, cap_ops;
  bool oom;
} graph_builder;

/* Starts a block in g (grows g->blocks). Returns NULL when out of memory. */
AP_HIDDEN graph_block *graph_block_begin(graph_builder *gb, graph *g, const char *name, block_role role,
                                         int64_t repeat);
/* Adds a tensor to the current block; returns its index (or -1 when out of memory). dims ends at the first
 * 0 entry. */
AP_HIDDEN int graph_tensor_add(graph_builder *gb, const char *name, dtype dt, int tp_dim, bool seq_parallel,
                               const int64_t *dims, int n_dims);
/* Adds an op (copied) to the current block; returns its index or -1. */
AP_HIDDEN int graph_op_add(graph_builder *gb, const graph_op *op);
/* A blank op of a kind with neutral defaults (one expert, top_k 1, no saved tensors, mask_of -1). */
AP_HIDDEN graph_op graph_op_init(op_kind kind, const char *name);

/* Fills g->edges from the blocks' tensors and ops (the edge rules are at graph_edge). Call once the graph is
 * complete; returns AP_NOMEM when out of memory. Every builder calls it (tf_build, graph_json_read, the ONNX
 * importer). */
AP_HIDDEN ap_status graph_build_edges(ap_ctx *ctx, arena *a, graph *g);
/* The index of the op of blk that produces tensor t (and, in *out_index when not NULL, which of its outputs),
 * or -1 when none does. */
AP_HIDDEN int graph_producer(const graph_block *blk, int t, int *out_index);

/* Checks structural invariants (indices in range, shapes consistent for matmuls); returns AP_INTERNAL or
 * AP_INVALID with a message naming the block and op. */
AP_HIDDEN ap_status graph_validate(ap_ctx *ctx, const graph *g, const char *file);

#endif
