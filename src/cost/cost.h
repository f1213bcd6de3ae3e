/* The cost model's face to the rest of autopar (cost layer): evaluate one plan of one model on one cluster.
 * DESIGN.md "Cost": iteration time with its breakdown, peak memory per pipeline stage with its breakdown, MFU,
 * tokens per second, and whether it fits. Searches and the CLI use only this header (and plan.h); the
 * piecewise section at the end serves the strategies that assemble a pipeline split themselves.
 *
 * Reading order and who calls whom: docs/cost-model.md "Layout of src/cost/". In short: tuning.c (the one table
 * of constants), compute.h (one op on one device), comm.h (one collective on one group), env.c (the model and
 * cluster once), layer.c (one layer), rank.c (one pipeline rank, piece by piece), schedule.c and memory.c (time
 * and bytes of the ranks), estimate.c (the whole plan), sim.c (the event-driven simulator of plan/schedule.h's
 * orders). */
#ifndef AP_COST_H
#define AP_COST_H

#include "cost/comm.h"
#include "cost/compute.h"
#include "plan/plan.h"
#include "plan/stack.h"

/* Constants of the memory model; see memory.c for sources. What each stack allocates besides them is data of
 * the stack table (plan/stack.h, plan_stack_mem). */
typedef struct {
  double overhead_bytes;     /* library workspaces inside the framework's allocator (cuBLAS, fused kernels) */
  double context_bytes;      /* the CUDA context, outside the framework's allocator */
  double comm_bytes;         /* one NCCL communicator's buffers, outside it too, per group a rank is in */
  double grad_bytes_per_param; /* 4: Megatron keeps fp32 main grads; 2: bf16 grads */
  double loss_bytes_per_logit; /* peak bytes per logit element while the loss runs, the 16-bit logits included */
  /* The caching allocator's reserve: bytes it holds beyond the live tensors (freed blocks kept cached, split
   * blocks that cannot be reused for a larger request), as a fraction of the transient bytes (activations,
   * logits, buffers, the optimizer step's copies), whose allocation pattern makes it: fitted by calibration to
   * the measured peaks. Part of the predicted total, so of the fit test and the OOM verdict. */
  double reserve_fraction;
  /* The same reserve when the stack runs the allocator with expandable segments
   * (plan_stack_mem.expandable_segments), which maps blocks into one growing segment: a mechanism of its own,
   * fitted on its own rows. */
  double expandable_reserve_fraction;
} memory_tuning;

AP_HIDDEN memory_tuning memory_tuning_defaults(void);

/* Bytes per parameter of the model states, unsharded (ZeRO, Rajbhandari et al. 2020 §5.1): the 16-bit weights,
 * the gradients (memory_tuning.grad_bytes_per_param) and the fp32 master weights with Adam's two moments.
 * memory.c, the data-parallel collectives of estimate.c and the searches' memory bounds all take them from here. */
typedef struct {
  double weights, grads, optimizer;
  double unsharded; /* gradient bytes no ZeRO stage shards (plan/stack.h: DeepSpeed's BF16 optimizer, torchtitan
                     * pipelining); in no sum below, memory.c adds them */
  bool zero1_without_zero; /* without ZeRO the optimizer shards the fp32 master weights and moments itself and
                            * reduces its fp32 accumulators (plan_stack_grad_bytes) */
} cost_state_bytes;
/* The least any stack keeps (2-byte gradients): what the searches' memory lower bounds use. */
AP_HIDDEN cost_state_bytes cost_state_bytes_per_param(const memory_tuning *mt);
/* What plan p's stack keeps (plan/stack.h) under its precision; a plan naming no stack runs on the model's
 * default (megatron-lm for a transformer, autopar otherwise, whose gradients are memory.grad_bytes_per_param). */
AP_HIDDEN cost_state_bytes cost_state_bytes_plan(const memory_tuning *mt, const plan *p, bool transformer);
/* Their sum per parameter under ZeRO stage zero_stage over n_dp data-parallel ranks (1: optimizer states
 * sharded, 2: + gradients, 3: + weights). */
AP_HIDDEN double cost_state_bytes_zero(const cost_state_bytes *sb, int64_t zero_stage, double n_dp);
/* Bytes one Adam step moves per parameter of the local optimizer shard: read the fp32 parameter, gradient and
 * two moments, write the parameter, the moments and the 16-bit copy (Kingma & Ba 2015; ZeRO §3.1 layout). */
#define COST_ADAM_STEP_BYTES_PER_PARAM 30.0
/* The GEMM dtype of a plan's precision (bf16, fp16 or fp8 matmuls): the one mapping the cost model, the
 * precision check and the searches' bounds use. */
AP_HIDDEN hw_dtype cost_gemm_dtype(plan_precision precision);

/* Overlap constants: what fraction of each kind of communication hides behind compute when overlap is on. */
typedef struct {
  double tp_overlap;   /* with --tp-comm-overlap (userbuffers), fraction of TP traffic hidden */
  double dp_overlap;   /* fraction of the data-parallel reduce/gather that can hide behind backward/forward */
  double zero3_overlap; /* the same for ZeRO-3/FSDP's per-micro-batch parameter gathers and gradient scatters */
  double cp_overlap;   /* ring attention's KV exchange hidden behind attention compute */
  double ep_overlap;   /* MoE all-to-all hidden (1F1B A2A overlap); 0 without it */
  double pp_overlap;   /* pipeline send/recv hidden in the steady state */
} overlap_tuning;

AP_HIDDEN overlap_tuning overlap_tuning_defaults(void);

/* All tunable constants together: what calibration fits and --calibration files replace. */
typedef struct {
  compute_tuning compute;
  comm_tuning comm;
  memory_tuning memory;
  overlap_tuning overlap;
} cost_tuning;

AP_HIDDEN cost_tuning cost_tuning_defaults(void);

/* One tunable constant of the cost model (tuning.c holds the one table of them). */
typedef enum { COST_SCOPE_DEVICE, COST_SCOPE_GLOBAL } cost_scope;
typedef struct {
  const char *name;   /* its key in calibration files: "gemm_eff_max", "bus_eff.network", "overlap.tp" … */
  cost_scope scope;   /* per device type (compute_tuning) or global (communication, overlap, memory) */
  size_t offset;      /* of the double within cost_tuning */
  const char *unit;   /* "1", "s", "bytes", "elements" */
  double min, max;    /* its physical range: what a calibration file may set and a fit may reach */
  double value;       /* the documented default */
  bool in_files;      /* calibration files carry it (the first entries of the table, in file order) */
  int fit_time, fit_memory; /* 1, 2 … : its turn in report/calibrate.c's throughput and memory fits; 0: kept */
  const char *source; /* where the default comes from, with its TUNING: reason */
} cost_tuning_param;
/* The table (static storage): *n_out entries, of which the first *n_in_files (may be NULL) are in calibration
 * files. */
AP_HIDDEN const cost_tuning_param *cost_tuning_params(size_t *n_out, size_t *n_in_files);
/* The constant k within t. */
AP_HIDDEN double *cost_tuning_ref(cost_tuning *t, const cost_tuning_param *k);

/* The environment of one evaluation: the model, the cluster and their derived tables. Built once per
 * (model, cluster, tuning) and shared by every plan evaluated against them. */
typedef struct cost_env cost_env;

/* Builds the environment; the model and cluster must outlive it. The caller frees *out with cost_env_free. */
AP_HIDDEN ap_status cost_env_new(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, const cost_tuning *t,
                                 cost_env **out);
AP_HIDDEN void cost_env_free(cost_env *env);
/* Replaces the environment's constants (calibration fits evaluate many tunings on one environment). */
AP_HIDDEN void cost_env_set_tuning(cost_env *env, const cost_tuning *t);
AP_HIDDEN const graph *cost_env_graph(const cost_env *env);
AP_HIDDEN const hw_cluster *cost_env_cluster(const cost_env *env);
AP_HIDDEN const cost_tuning *cost_env_tuning(const cost_env *env);
/* Whether every device of the cluster carries autopar profile's measurements of the reference executor (a
 * cluster file from `autopar profile`, docs/executor.md) and the model has transformer layers, which the
 * executor's cost model prices (exec_cpu.h). */
AP_HIDDEN bool cost_env_executor(const cost_env *env);
/* The stack plan p runs on: its own when it names one; else autopar, the reference executor, on such a
 * cluster (cost_env_executor); else plan_stack_default. *why (may be NULL) receives a static phrase saying
 * which: "stated", "the default", or why the cluster's. */
AP_HIDDEN plan_stack cost_env_stack(const cost_env *env, const plan *p, const char **why);

/* Time breakdown of one iteration, seconds, on the critical path. */
typedef struct {
  double forward, backward, recompute; /* compute of the slowest pipeline rank, all micro-batches */
  double bubble;                       /* pipeline fill and drain */
  double tp_comm, cp_comm, ep_comm, pp_comm, dp_comm; /* exposed communication */
  double optimizer;                    /* optimizer step on the device */
  double offload;                      /* offload's host-link transfers and host-side step (offload.c) */
} cost_time;

/* Memory of one pipeline rank, bytes per device. */
typedef struct {
  double params, grads, optimizer, activations, logits, buffers;
  double step;      /* the optimizer step's transient copies of the gradients (plan_stack_mem) */
  double workspace; /* library workspaces (memory.overhead_bytes) */
  double reserve;   /* the caching allocator's reserve (memory.reserve_fraction) */
  double context;   /* CUDA context and NCCL buffers, outside the allocator (memory.context_bytes, comm_bytes) */
  double total;     /* the sum of all the parts above: what nvidia-smi shows at the rank's peak */
} cost_mem;

enum { COST_MAX_RANKS = PLAN_MAX_CHUNKS };

typedef struct {
  double iter_s;
  cost_time time;
  int n_ranks; /* pipeline ranks (pp) */
  cost_mem mem[COST_MAX_RANKS];
  double peak_mem_bytes;
  int peak_rank;
  double capacity_bytes; /* device memory */
  double reserve_fraction; /* the allocator reserve the peak rank's total holds, of its transient bytes (memory.c) */
  double host_mem_bytes;      /* host memory per node that offload takes; 0 without offload */
  double host_capacity_bytes; /* the node's host memory; 0 without offload */
  double nvme_bytes;          /* NVMe per node that offload to NVMe takes; 0 without */
  double nvme_capacity_bytes; /* the node's NVMe capacity with NVMe offload; 0 without, or not stated */
  bool fits;                  /* device memory, and host memory when offloading */
  double tokens_per_iter, tokens_per_s, tokens_per_s_per_device;
  /* FLOP per iteration under three conventions (DESIGN.md; COSTMODEL.md §1.3-1.5): PaLM model FLOP (6N + 12LHQT
   * per token, no causal discount); Megatron's num_floating_point_operations (causal /2 on attention); hardware
   * FLOP (what the devices execute, recompute included). */
  double flop_palm, flop_megatron, flop_hardware;
  double mfu_palm, mfu_megatron, hfu;
  /* The graph's own training FLOP (every op's forward, dgrad and wgrad, graph_train_flop_per_seq) and its MFU:
   * the headline for general graphs (ONNX, JSON op graphs), where 6N counts neither a convolution's reuse of
   * its weights nor a sample's many positions (ResNet-50's PaLM MFU reads 0.0%). */
  double flop_graph, mfu_graph;
  bool headline_graph; /* the text's MFU headline is mfu_graph (a general graph), else PaLM's */
  double tflops_per_device_palm, tflops_per_device_megatron;
  const char *bound; /* "compute", "bubble", "communication", "offload" or "memory" */
  /* Per pipeline chunk, one micro-batch: forward, backward (recompute and exposed communication included) and
   * the weight-gradient part of backward, seconds; and one pipeline send/recv. For the simulator. */
  double chunk_tf_s[PLAN_MAX_CHUNKS], chunk_tb_s[PLAN_MAX_CHUNKS], chunk_tw_s[PLAN_MAX_CHUNKS];
  double p2p_s;
  double pipeline_s; /* the closed-form pipeline time that iter_s is built on */
} cost_result;

/* One interval of the simulated timeline (F, B and W as plan/schedule.h's sched_pass). */
typedef enum { SIM_F, SIM_B, SIM_W } sim_kind;
typedef struct {
  sim_kind kind;
  int rank, chunk;
  int64_t micro_batch;
  double start_s, end_s;
} sim_event;

/* The event-driven pipeline simulator (sim.c): runs the plan's schedule (plan/schedule.h) over its chunks and
 * micro-batches with the per-chunk times of r, each stage executing its passes in the schedule's order as soon
 * as their inputs have arrived. Sets *pipeline_s to the pipeline time in seconds; when events is not NULL,
 * *events receives every pass as an interval (the caller frees it with free()) and *n_events their count.
 * A schedule of more than max_passes passes (0: no limit) fails with AP_UNSUPPORTED, one line naming the
 * count, the limit and the option that raises it; out of memory fails with AP_NOMEM. */
AP_HIDDEN ap_status sim_pipeline(ap_ctx *ctx, const plan *p, const cost_result *r, size_t max_passes,
                                 sim_event **events, size_t *n_events, double *pipeline_s);
/* The passes (events) the schedule of p runs: pp·vpp chunks × micro-batches × 2 (3 for zero-bubble). */
AP_HIDDEN size_t sim_n_passes(const plan *p);
/* The default limit on a simulation's passes: a Chrome trace of a million events is about 200 MB, and more
 * than a trace viewer loads. */
enum { SIM_MAX_PASSES_DEFAULT = 1000000 };

/* Evaluates plan p (validated against the model and cluster first). AP_INVALID names the violated constraint;
 * a plan that does not fit still evaluates (fits = false). */
AP_HIDDEN ap_status cost_estimate(ap_ctx *ctx, const cost_env *env, const plan *p, cost_result *out);

/* The result as JSON / text (the caller frees with free()). */
/* How the public entry points (ap_estimate, ap_simulate) took a plan to the cost model: where its stack
 * came from ("plan", "cluster", "default") and the phrase saying why (cost_env_stack), and, when it runs on
 * fewer ranks than the executor's cluster has, devices_used of devices_of (0 otherwise). */
typedef struct {
  const char *stack_source, *stack_why;
  int64_t devices_used, devices_of;
} cost_plan_note;
/* The environment for one plan of the public API: builds *env for the cluster, names the plan's stack
 * (cost_env_stack: a plan that names none takes the cluster's or the default; on autopar profile's cluster the
 * executor's fp32 unless the plan states a precision), resolves the derived fields (plan_resolve), and, on the
 * executor's cluster, gives a plan that states fewer ranks than it has the first of them (*sub, a cluster the
 * caller frees with ap_cluster_free after freeing *env). Fills *note. */
AP_HIDDEN ap_status cost_env_for_plan(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap,
                                      cost_env **env, ap_cluster **sub, cost_plan_note *note);
AP_HIDDEN char *cost_result_json(const cost_env *env, const plan *p, const cost_result *r, const cost_plan_note *note);
AP_HIDDEN char *cost_result_text(const cost_env *env, const plan *p, const cost_result *r, const cost_plan_note *note);

/* ---- Piecewise costs: the parts of cost_estimate that the strategies building a pipeline split piece by
 * piece (search/stage_dp.c, layer_dp.c, hetero.c) combine themselves. What a strategy may know of the
 * environment beyond the graph and the cluster: ---- */
/* The model facts of plan.h, computed once per environment. */
AP_HIDDEN const plan_model_facts *cost_env_facts(const cost_env *env);
/* Pipeline units (layers; for a graph without layer blocks, the repeats of all its blocks). */
AP_HIDDEN int64_t cost_env_n_layers(const cost_env *env);
/* For each pipeline unit, the index of its block (cost_env_n_layers entries). */
AP_HIDDEN const int *cost_env_unit_block(const cost_env *env);

/* Costs of one block repeat (one layer) for one micro-batch on one device of its pipeline rank. */
typedef struct {
  double fwd_s, bwd_s, wgrad_s;   /* compute; wgrad_s is the part of bwd_s that computes weight gradients */
  double recompute_full_s;        /* one more forward of the whole layer */
  double recompute_sel_s;         /* one more forward of the core attention */
  double recompute_op_s;          /* one more forward of the ops per-op checkpointing drops (plan.h "op") */
  double recompute_op_flop;       /* their FLOP per device */
  double tp_comm_s, cp_comm_s, ep_comm_s; /* per micro-batch, forward + backward, before overlap */
  double tp_recompute_comm_s;     /* the forward TP collectives again, paid by layers that fully recompute */
  double attn_fwd_s;              /* core attention forward compute (what CP's KV exchange can hide behind) */
  double attn_fwd_flop;           /* its FLOP per device (selective recompute runs it again) */
  double act_bytes[PLAN_RECOMPUTE_COUNT_]; /* saved activations per micro-batch, by recompute policy */
  double act_full_working_bytes;  /* transient: the whole layer's activations while it is recomputed */
  double params_dense;            /* parameters held by this device (after tp split) */
  double params_expert;           /* expert parameters held by this device (after ep, etp split) */
  double param_max;               /* the largest one parameter tensor of the block on this device (one expert's) */
  double fwd_flop, bwd_flop;      /* per device */
} layer_cost;

/* Evaluates block bi for plan p at micro-batch b, sequence s; groups are the plan's axes on the cluster. */
typedef struct {
  comm_group tp, cp, ep, dp, edp; /* dp is the dp-cp group of the dense mesh */
  /* Pipeline send/recv: pp_link[l] is a transfer between two ranks that first share a domain of link level l
   * (the environment's, one per level); pp_level[r] the outermost level that pipeline rank r's sends and
   * receives cross, from the rank lists of the plan's order (cost/groups.h). */
  const comm_group *pp_link;
  uint8_t pp_level[COST_MAX_RANKS];
} plan_groups;

AP_HIDDEN ap_status cost_plan_groups(ap_ctx *ctx, const cost_env *env, const plan *p, plan_groups *out);
/* The send/recv group of pipeline rank r's transfers. */
AP_HIDDEN const comm_group *cost_pp_group(const plan_groups *pg, int r);
AP_HIDDEN layer_cost cost_block(const cost_env *env, const plan *p, const plan_groups *pg, int bi, double b, double s);
/* cost_block on the device of node group `group` (cost_block is group 0). */
AP_HIDDEN layer_cost cost_block_on(const cost_env *env, int group, const plan *p, const plan_groups *pg, int bi, double b,
                                   double s);
/* Heterogeneous clusters: the node group whose device pipeline rank r of plan p is costed on, and in
 * *capacity_bytes (may be NULL) the device memory that bounds the rank. A rank's devices are those whose
 * position along the pp axis of the mesh is r (with the default order, pp outermost, a contiguous block of
 * devices); of the node groups they touch, the one with the lowest dense bf16 peak sets the pace (its
 * collectives wait for the slowest member) and the smallest memory bounds it. 0 and the first group's memory
 * on a cluster of one node group. */
AP_HIDDEN int cost_rank_group(const cost_env *env, const plan *p, int64_t r, double *capacity_bytes);

/* Per pipeline rank aggregates for the schedule and memory models. */
typedef struct {
  double tf, tb, tw;          /* forward, backward (recompute included), weight-gradient part: one micro-batch */
  double act_bytes;           /* saved activations of one micro-batch of all the rank's chunks */
  double act_chunk_bytes_max; /* the largest chunk's */
  /* tf + tb of the chunk being built (cost_rank_add_layer adds, cost_rank_end_chunk closes) and of the rank's
   * slowest chunk: an uneven split's longest chunk, which the interleaved schedule's fill waits on. */
  double chunk_t_s, chunk_t_max_s;
  double working_bytes;       /* transient per-layer peak */
  double params_dense, params_expert;
  double param_max;           /* the largest one parameter tensor the rank holds, per device (layer_cost) */
  int64_t n_layers;           /* layers of all the rank's chunks */
  /* The breakdown of tf + tb: compute, recompute and exposed communication of one micro-batch (the non-layer
   * blocks' TP collectives whole), and the hardware FLOP of one micro-batch times tp·cp. */
  double fwd_s, bwd_s, recompute_s, tp_s, cp_s, ep_s, hw_flop;
  /* What the non-layer blocks add to the first chunk ([0]) and to the last chunk ([1]), if this rank holds them. */
  double edge_tf_s[2], edge_tb_s[2], edge_tw_s[2];
  double p2p_s;               /* send or receive of one boundary activation */
  bool has_embed, has_head;
} rank_cost;

/* Pipeline time of the schedule (closed form), filling out->bubble and compute terms; returns seconds. */
AP_HIDDEN double schedule_time_s(const plan *p, const rank_cost *rc, int n_ranks, cost_time *out);
/* The interleaved and ZB-V schedules on an uneven split, from the chunk times (tf, tb, tw of chunk c, pp·vpp
 * of them): m·Σ_j max_r (the j-th chunk of rank r) + the fill; 0 for the other kinds. estimate.c takes the
 * larger of this and schedule_time_s (they are equal on even splits). */
AP_HIDDEN double schedule_lockstep_s(const plan *p, const rank_cost *rc, int n_ranks, const double *chunk_tf_s,
                                     const double *chunk_tb_s, const double *chunk_tw_s);
/* ZB-V (vpp 2): the longer of two paths of plan/schedule.h's order, the one that switches from a later
 * micro-batch's forward to micro-batch 0's backward and the one along the bottom rank (schedule.c derives
 * them); path is Σ_r (tf + tb − tw) of the ranks. At or below the simulated time (tests/test_closed_form_v.c);
 * schedule_lockstep_s takes the larger of it and its latency. */
AP_HIDDEN double schedule_zbv_paths_s(const plan *p, double path, const double *chunk_tf_s,
                                      const double *chunk_tb_s, const double *chunk_tw_s);
/* The pipeline time cost_estimate reports: adds the ranks' non-layer blocks (edge_*) to the first and last of
 * the layer-only chunk times (modified in place), then the larger of schedule_time_s and schedule_lockstep_s.
 * The searches' predictors call it with the same pieces, so they predict what cost_estimate computes. */
AP_HIDDEN double schedule_pipeline_s(const plan *p, rank_cost *rc, int n_ranks, double *chunk_tf_s, double *chunk_tb_s,
                                     double *chunk_tw_s, cost_time *out);
/* Memory of pipeline rank r. */
AP_HIDDEN cost_mem memory_rank(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b, double s);
/* The allocator reserve plan p's stack holds, as a fraction of its transient bytes (memory.c): memory.
 * reserve_fraction, or memory.expandable_reserve_fraction where the stack runs expandable segments. */
AP_HIDDEN double cost_reserve_fraction(const cost_env *env, const plan *p);
/* The NCCL communicators pipeline rank r of plan p holds (memory.c), each memory.comm_bytes of device memory,
 * under its stack's memory mechanisms sm (NULL: none; plan_stack_mem.p2p_pairs, groups); tied: the model ties
 * its embedding and head (the tied-weight group of DeepSpeed's pipeline engine). */
AP_HIDDEN int cost_nccl_comms(const plan *p, int r, const plan_stack_mem *sm, bool tied);
/* cost_nccl_comms for rank r of plan p on env's model, with the plan's stack: what memory_rank counts. */
AP_HIDDEN int cost_rank_nccl_comms(const cost_env *env, const plan *p, int r);
/* Whether plan p's optimizer shards its fp32 master weights and moments over the data-parallel ranks: ZeRO-1 and
 * up, or an optimizer that does so without ZeRO (cost_state_bytes.zero1_without_zero). */
AP_HIDDEN bool cost_optimizer_sharded(const plan *p, const cost_state_bytes *sb);

/* The piecewise costs (rank.c): the pieces cost_estimate builds every rank from, so that a dynamic programme
 * over splits predicts the finished plan's pipeline time (schedule_time_s on the ranks' tf + tb) and memory
 * (memory_rank) as cost_estimate computes them. */
/* Adds one layer of cost L (cost_block_on for the rank's group) to rank R as cost_estimate's chunk loop does,
 * under full recompute when full (else the plan's granularity); its saved activation bytes go to
 * *chunk_act_bytes, which cost_rank_end_chunk adds to R once the chunk is complete. */
/* What one layer adds to its rank beyond compute: its recompute and exposed communication, seconds. */
typedef struct {
  double recompute_s, tp_exposed_s, cp_exposed_s, ep_exposed_s;
} layer_share;
AP_HIDDEN layer_share cost_rank_add_layer(const cost_env *env, const plan *p, const layer_cost *L, bool full,
                                          rank_cost *R, double *chunk_act_bytes);
AP_HIDDEN void cost_rank_end_chunk(rank_cost *R, double chunk_act_bytes);
/* Adds to R what pipeline rank r holds besides its layers: the non-layer blocks (the
 * head with the last chunk, the others with chunk 0), the copy of a tied embedding on the last rank, and the
 * exposed pipeline sends and receives. */
AP_HIDDEN void cost_rank_add_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *R);
/* cost_rank_add_extras into a cleared *out. */
AP_HIDDEN void cost_rank_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *out);
/* into += from: sums of the times, bytes and parameters, maxima of the peaks, union of the flags. */
AP_HIDDEN void cost_rank_merge(rank_cost *into, const rank_cost *from);

#endif
