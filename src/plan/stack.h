/* The software stack a plan runs on (plan layer): one table row per stack (stack.c) saying what it can run
 * (pipeline schedules, which ZeRO stages combine with pipeline parallelism, recompute kinds, a fused loss,
 * tensor parallelism), the bytes it keeps per parameter for gradients by precision, the attention kernel it
 * uses and its defaults (expert tensor parallelism). The searches and the completion consult
 * plan_stack_runs so that they only choose what the stack runs; the memory model (cost/memory.c) reads the
 * gradient bytes. Every number cites its source file at a commit (stack.c). */
#ifndef AP_PLAN_STACK_H
#define AP_PLAN_STACK_H

#include <stdbool.h>
#include <stddef.h>

#include "plan/plan.h"

/* Bytes per parameter a stack keeps for gradients under one precision: `grads` is the buffer that is reduced
 * over the data-parallel ranks (sharded from ZeRO-2 on), `unsharded` an extra copy kept only by the stack's
 * optimizer without ZeRO (DeepSpeed's BF16 optimizer's fp32 accumulators, the ZeRO-0 wrapper), and
 * `unsharded_pp` one kept only when pp > 1. `zero1_without_zero`: that optimizer without ZeRO is itself a
 * ZeRO-1: it shards the fp32 master weights and Adam's moments over the data-parallel ranks, steps on the fp32
 * accumulators it keeps (no step copies) and reduces them in place (no bucket) (DeepSpeed's BF16_Optimizer,
 * stack.c [DS-bf16]). */
typedef struct {
  double grads, unsharded, unsharded_pp;
  bool zero1_without_zero;
} plan_stack_grad_bytes;

/* The process groups a stack's launch opens beyond those of its parallel degrees (cost/memory.c cost_nccl_comms;
 * each group a collective runs on is a communicator of its own, with its own buffers). */
typedef enum {
  PLAN_GROUPS_PLAIN,   /* one per parallel degree (Megatron-Core, torchtitan, FSDP) */
  PLAN_GROUPS_DS_PIPE, /* with pp > 1, DeepSpeed's pipeline grid: data, pipe, model (tp·pp) and slice (tp) groups,
                        * the tied-embedding group of the first and last stage (stack.c [DS-groups]) */
  PLAN_GROUPS_MDS,     /* Megatron-DeepSpeed: that grid at every pp (GPTModelPipe runs the pipeline engine), plus
                        * Megatron's own data- and pipeline-parallel groups, which the dataset's barrier uses
                        * (stack.c [DS-groups] [MDS-groups]) */
} plan_stack_groups;

/* What a stack allocates besides the model states and the saved activations (cost/memory.c turns them into
 * bytes): the transient copies its optimizer step makes of the gradients, per parameter of the local ZeRO-1/2
 * partition (`step_bytes_zero`) or per local parameter without ZeRO (`step_bytes_nozero`); the gradient-
 * reduction bucket its ZeRO-1/2 optimizer keeps from the backward on, in elements of the 16-bit gradient type;
 * the peak bytes per logit element of its default loss, the 16-bit logits included (0: the cost model's
 * memory.loss_bytes_per_logit); and whether its launch scripts turn on the caching allocator's expandable
 * segments, which keep fragmentation low (memory.expandable_reserve_fraction then applies);
 * and the CUDA context its software takes where it loads every kernel module at start (CUDA before 11.7, or
 * CUDA_MODULE_LOADING=EAGER): bytes beyond the lazily loaded context memory.context_bytes counts; and whether
 * its pipeline sends one tensor at a time (torch.distributed.send/recv), for which PyTorch opens a communicator
 * per pair of neighbours, rather than batching them (batch_isend_irecv), which runs on the pipeline group's one
 * communicator (stack.c [DS-p2p] [MLM-p2p]; cost/memory.c cost_nccl_comms). */
typedef struct {
  double step_bytes_zero, step_bytes_nozero, bucket_elems, loss_bytes_per_logit;
  bool expandable_segments;
  double eager_context_bytes; /* the whole CUDA context its software measured with eager module loading, in place
                               * of memory.context_bytes; 0: lazy loading, memory.context_bytes */
  bool p2p_pairs;             /* pipeline send/recv one at a time: one communicator per neighbour */
  /* Bytes per element of the one gradient at a time its ZeRO-1/2 step copies to take the gradient norm (fp64:
   * 8), over the largest gradient (or the part of it) in the rank's partition: the step's transient is the
   * larger of this and step_bytes_zero per parameter of the partition (stack.c [DS-norm]); 0: none. */
  double norm_copy_bytes;
  /* Its pipeline engine keeps every in-flight micro-batch's stage output until that micro-batch's backward, cut
   * to the rank's 1/tp share with tp > 1, and with tp = 1 the received input besides the forward's copy of it;
   * and one receive buffer for the activations and one for the gradients, each the 1/tp share, kept for the
   * whole run (stack.c [DS-pipe-buf]). */
  bool pipe_buffers;
  /* Its ZeRO-1 keeps contiguous_gradients and overlap_comm as configured (DeepSpeed @38327e07: a bucket of
   * bucket_elems, two with overlap_comm), rather than turning both off at stage 1 (@2151c787: the reduction
   * flattens at most bucket_elems of the rank's gradients at a time); stack.c [DS-bucket]. */
  bool zero1_contiguous;
  /* Which process groups it opens besides the model's tensor-parallel one (cost/memory.c cost_nccl_comms). */
  plan_stack_groups groups;
} plan_stack_mem;

/* The loss of a stack (cost/memory.c, cost/compute.c; stack.c [MLM-ce] … [FA-ce]): whether it runs its fused
 * cross entropy when the plan does not say (plan_stack_info.fused_loss says whether it has one); the peak bytes
 * per logit element of that fused loss, the 16-bit logits included (0: the same as its unfused loss, which
 * keeps the same fp32 copy; 2: in place over the logits, with only an fp32 log-sum-exp per token); and the
 * device-memory bytes each of its two losses moves per logit element in the forward and in the backward pass
 * (0: the loss op's own figure, one read of the 16-bit logits forward and twice that backward, model/graph.c). */
typedef struct {
  bool fused_default;
  double fused_bytes_per_logit;
  double unfused_fwd_bytes, unfused_bwd_bytes, fused_fwd_bytes, fused_bwd_bytes;
  /* A chunked loss (torchtitan's ChunkedLossWrapper, stack.c [TT-chunk]) as the fused one: the LM head and the
   * unfused loss run on this many slices of the micro-batch's tokens in turn, each backward right after its
   * forward, so only one slice's logits live at a time and none are saved for the backward pass, and an fp32
   * gradient of the head's input accumulates over the slices. 0: not chunked. */
  int fused_chunks;
} plan_stack_loss;

/* ChunkedLossWrapper.Config.num_chunks's default at torchtitan b5bcd76c (stack.c [TT-chunk]): the torchtitan
 * stack's fused_chunks; tests/test_export.c checks it against the source's (tests/data/framework_args.tsv). */
#define PLAN_STACK_TT_LOSS_CHUNKS 8

typedef struct {
  const char *name;
  unsigned schedules;    /* bit s = plan_schedule s runs (with pp > 1) */
  unsigned zero;         /* bit z = ZeRO stage z runs without pipeline parallelism */
  unsigned zero_with_pp; /* bit z = ZeRO stage z runs with pp > 1 */
  unsigned recompute;    /* bit r = plan_recompute r */
  bool pipeline, tensor_parallel, context_parallel, expert_parallel, fused_loss;
  int etp_default;       /* expert tensor parallel the stack's recipes default to: 0 = tp (Megatron), 1 */
  const char *attention; /* the attention kernel it runs */
  plan_stack_grad_bytes grad[PLAN_PREC_COUNT_];
  const char *source;    /* where the row's facts come from (files at commits) */
  plan_stack_mem mem;    /* memory mechanisms (above) */
  bool attn_scores;      /* attention writes the [b, heads, s, s] scores and probabilities to device memory
                          * (unfused softmax attention) instead of a flash kernel that keeps them on chip */
  bool attn_sm80;        /* its flash attention is FlashAttention-2, built on Ampere's mma.sync: on Hopper and
                          * Blackwell it reaches a fraction of the native kernels' rate (cost/compute.c) */
  bool pp_sync_after;    /* with pp > 1 the gradient reduction and the parameter gather run after the last
                          * backward of the step, overlapped with nothing (DeepSpeed's pipeline engine) */
  plan_stack_loss loss;  /* its losses (above); fused_loss says whether it has a fused one */
  bool moe_host_sync;    /* its dropless MoE layers copy the tokens per expert to the host and wait for them in
                          * every forward (Megatron-Core, stack.c [MLM-moe-sync]): the host cannot run ahead of
                          * the GPU across MoE layers (cost/layer.c, compute_tuning.moe_host_s) */
  bool chunk_recompute;  /* runs a different full-recompute layer count per pipeline chunk (plan.h
                          * chunk_recompute_layers, the layer DP's plans); the frameworks take one count */
  bool partial_recompute; /* runs full recompute of only the first recompute_layers layers of each chunk
                           * (Megatron's --recompute-method block); false where every layer or none recomputes */
  bool dropout;          /* its runs keep dropout on (hidden and attention dropout, 1-byte masks saved for the
                          * backward; stack.c [MDS-drop]): cost/activations.c adds the masks a policy keeps */
} plan_stack_info;

/* The row of stack s (NULL for PLAN_STACK_DEFAULT or out of range). */
AP_HIDDEN const plan_stack_info *plan_stack_get(plan_stack s);
/* The stack a plan runs on when none is named: megatron-lm for a model with transformer layers, autopar (the
 * reference executor, which runs every schedule) for a general graph. */
AP_HIDDEN plan_stack plan_stack_default(bool transformer);
/* The stack an export format implies (megatron → megatron-lm, deepspeed → deepspeed, torchtitan* →
 * torchtitan); PLAN_STACK_COUNT_ for a format that implies none. */
AP_HIDDEN plan_stack plan_stack_of_export(const char *format);
/* Whether stack s runs plan p; false with the reason in why (n bytes; may be NULL). */
AP_HIDDEN bool plan_stack_runs(plan_stack s, const plan *p, char *why, size_t n);
/* Whether stack s runs the values that `fixed` holds in the fields of `mask` (plan_field bits, as --fix sets
 * them), whatever the search chooses for the others: false with the reason, naming the field and the value, in
 * why (n bytes), so that a --fix the stack cannot meet fails at once instead of searching an empty space. */
AP_HIDDEN bool plan_stack_runs_fixed(plan_stack s, const plan *fixed, unsigned mask, char *why, size_t n);
/* Whether stack s runs its fused loss when a plan does not say (plan_stack_loss.fused_default); false for
 * PLAN_STACK_DEFAULT, whose stacks (megatron-lm, autopar) both default to the unfused loss. */
AP_HIDDEN bool plan_stack_fused_default(plan_stack s);
/* Whether the fused loss of stack s can never lose to its unfused one: it keeps no more bytes per logit and
 * moves no more bytes in either pass. Then the search takes it for every plan that does not fix fused_loss,
 * at no extra evaluation (plan_stack_search_fused); false for a stack without a fused loss. */
AP_HIDDEN bool plan_stack_fused_dominates(plan_stack s);
/* The fused_loss the search gives plans that do not fix it: true where the fused loss dominates, else the
 * stack's default. */
AP_HIDDEN bool plan_stack_search_fused(plan_stack s);
/* The gradient bytes per parameter of plan p (its stack, precision, ZeRO stage and pp). */
AP_HIDDEN plan_stack_grad_bytes plan_stack_grads(const plan *p);
/* plan_stack_grads of p run on the given stack instead of p->stack. */
AP_HIDDEN plan_stack_grad_bytes plan_stack_grads_on(const plan *p, plan_stack stack);

#endif
