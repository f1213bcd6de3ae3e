/* The table of software stacks (plan layer; see stack.h): what each stack runs and the gradient bytes it keeps
 * per parameter, one row per stack, each fact with its source file at a commit. Facts only: no constant here
 * is fitted to measured runs; the cost model turns them into time and memory by mechanism (cost/memory.c).
 *
 * Sources (read 2026-12-01):
 *  [MLM-sched] NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py, get_forward_backward_func:
 *      no pipelining, 1F1B (forward_backward_pipelining_without_interleaving) and interleaved 1F1B only; no
 *      GPipe, no zero-bubble schedule.
 *  [MLM-args] NVIDIA/Megatron-LM megatron/training/arguments.py @307dcf37: with --bf16 gradients are
 *      accumulated and all-reduced in fp32 (accumulate_allreduce_grads_in_fp32 = True, main_grads_dtype fp32)
 *      unless --grad-reduce-in-bf16; fp16 keeps them in the parameter dtype.
 *  [MLM-rc] Megatron-Core megatron/core/transformer/transformer_config.py: recompute_granularity full /
 *      selective, and with selective recompute_modules (core_attn, layernorm, mlp, moe_act, …): per-module
 *      checkpointing, which plan.h's "op" kind models. @d98e8a64: recompute_num_layers is one Optional[int],
 *      "the number of transformer layers to recompute within each pipeline stage" (method block) or per
 *      recompute unit (uniform): one count for every chunk. DeepSpeed's activation_checkpoint_interval
 *      (runtime/pipe/module.py) and torchtitan's activation_checkpoint config are one setting for the whole
 *      model too; only autopar's executor and the what-if space take a count per chunk.
 *  [MLM-ddp] Megatron-Core distributed_data_parallel_config.py: data_parallel_sharding_strategy no_shard /
 *      optim / optim_grads / optim_grads_params (Megatron-FSDP), the distributed optimizer being ZeRO-1.
 *  [MB-mp] NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py @05097809: bf16_mixed
 *      sets grad_reduce_in_fp32=True; the performance configs (scripts/performance, e.g. the Llama 3.1 405B
 *      GB200/B200/H100 configs) set cfg.ddp.grad_reduce_in_fp32 = False: bf16 gradients (commit not pinned).
 *  [NeMo-mp] NVIDIA/NeMo nemo/collections/llm/recipes/precision/mixed_precision.py: bf16_mixed with
 *      grad_reduce_in_fp32=True (commit not pinned).
 *  [DS-pipe] deepspeedai/DeepSpeed deepspeed/runtime/pipe/engine.py @e787c163: PipelineEngine asserts ZeRO
 *      stage < 2 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); deepspeed/runtime/pipe/
 *      schedule.py TrainSchedule is 1F1B, the only training schedule; it appends ReduceTiedGrads, ReduceGrads
 *      and OptimizerStep after the last micro-batch's backward (step_id == total_steps - 1), so with pipeline
 *      parallelism the gradient reduction and ZeRO's parameter gather overlap no compute.
 *  [DS-bf16] deepspeedai/DeepSpeed deepspeed/runtime/bf16_optimizer.py @0acdb021: BF16_Optimizer keeps the
 *      bf16 gradients and an fp32 gradient buffer the size of the whole flat bf16 group (fp32_groups_
 *      gradients_flat, torch.zeros_like(bf16_groups_flat, dtype=grad_acc_dtype), fp32 by default), sharding
 *      only the fp32 master partition and Adam's states (ZeRO-1). The same at microsoft/DeepSpeed @77b649d1
 *      (olruwase/bf16-updates, 2022-03, the branch BigScience trained BLOOM on: tr11-176B-ml/chronicles-
 *      prequel.md @9e64edec) and @38327e07 (2025-02): fp32_groups_flat_partition is the dp rank's share of the
 *      flat group (bf16_dp_partitions[partition_id].clone().float()), so at ZeRO stage 0 the optimizer itself
 *      shards its master weights and moments over the data-parallel ranks (tr11-176B-ml.slurm: "bf16 must use
 *      z0! it implements its own zero stage 1 equivalent"); step() takes the norm of the fp32 gradients and
 *      clips them in place and steps on them (no copies), and the pipeline engine all-reduces the flat fp32
 *      gradients in place (pipe/engine.py _bf16_reduce_grads: one tensor, which flatten does not copy).
 *  [DS-fp16] DeepSpeed's fp16 optimizers (runtime/fp16/fused_optimizer.py, ZeRO-1/2 stage_1_and_2.py) reduce
 *      fp16 gradients: 2 bytes per parameter (commit not pinned).
 *  [TT] pytorch/torchtitan: FSDP2 with MixedPrecisionPolicy(reduce_dtype = mixed_precision_reduce, "float32"
 *      by default) so sharded gradients are fp32; pipeline schedules from torch.distributed.pipelining (GPipe,
 *      1F1B, Interleaved1F1B, ZBVZeroBubble); no optimizer-only sharding (no ZeRO-1); activation checkpointing
 *      none / selective op / full; with pipeline parallelism the gradients of all micro-batches accumulate
 *      unsharded in fp32 before the reduce-scatter (issue 10's reading; commit not pinned).
 *  [MDS-attn] bigscience-workshop/Megatron-DeepSpeed megatron/model/transformer.py @06dc2d7f, ParallelAttention.
 *      forward: raw scores [b·np, sq, sk] by torch.baddbmm into a preallocated tensor, FusedScaleMaskSoftmax,
 *      attention dropout, torch.bmm with V: the scores and probabilities go through device memory, and the
 *      full sq×sk product is computed (no causal skipping). That fork has no flash path; microsoft/Megatron-
 *      DeepSpeed added flash attention later as an opt-in flag (--use-flash-attn, store_true; commit not
 *      pinned), so the unfused kernel is the stack's default.
 *  [FA2] llm-foundry's attn_impl flash calls flash-attn 2.x (flash_attn_varlen_func; commit not pinned) and
 *      PyTorch's SDPA flash backend is FlashAttention-2 (PyTorch 2.2 release notes), which torchtitan uses;
 *      FlashAttention-2 runs on Ampere's mma.sync instructions and reaches about 35% of H100's peak where
 *      FlashAttention-3 and cuDNN's fused attention (Transformer Engine, Megatron's stacks) use Hopper's wgmma
 *      and TMA and reach 75% (Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, §1 and §4.1).
 *  [LF] mosaicml/llm-foundry: Composer's FSDP (FULL_SHARD = 3, SHARD_GRAD_OP = 2), no tensor or pipeline
 *      parallelism, attn_impl flash, loss_fn fused_crossentropy ([LF-ce]); gradient width not verified: the
 *      cost model's former 4 bytes kept.
 *  [DS-engine] deepspeedai/DeepSpeed deepspeed/runtime/engine.py @edaa7221, _do_optimizer_sanity_check and
 *      get_data_types: with ZeRO enabled the ZeRO optimizer (zero/stage_1_and_2.py) runs bf16 as it runs fp16,
 *      with gradients in the model dtype (grad_accum_dtype defaults to it); BF16_Optimizer is chosen only with
 *      ZeRO-1 and an fp32 grad_accum_dtype, or without ZeRO under pipeline parallelism: its fp32 accumulators
 *      ([DS-bf16]) are the ZeRO-0 case here.
 *  [DS-step] deepspeedai/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py @edaa7221, DeepSpeedZeroOptimizer.step:
 *      the local gradient partition is flattened into one 16-bit tensor and cast to an fp32 copy
 *      (single_grad_partition) before the Adam step: 2 + 4 bytes per parameter of the partition; without ZeRO,
 *      deepspeed/runtime/fp16/fused_optimizer.py FP16_Optimizer.step casts every gradient to fp32 (p.grad.to)
 *      and flattens the list (_flatten_dense_tensors): 4 + 4 bytes per parameter, all alive at the cat.
 *  [DS-bucket] the same stage_1_and_2.py: reduce_bucket_size defaults to 500,000,000 elements, and with
 *      contiguous_gradients (default true) a bucket of that many elements of the 16-bit dtype is allocated
 *      for the reduction (backward(); reduce_gradients() under pipeline parallelism), two with overlap_comm
 *      (ipg_buffer's buf_0 and buf_1), which the pipeline engine turns off; microsoft/DeepSpeed deepspeed/
 *      runtime/engine.py @38327e07 _configure_zero_optimizer keeps both settings at stage 1. At @2151c787
 *      (2022-02-18, the master the BigScience rows of 02-2022 ran) it turned contiguous_gradients and
 *      overlap_comm off for stage 1 ("meaningless in stage 1"), and the reduction flattened buckets of at most
 *      reduce_bucket_size elements of the rank's gradients instead (stage_1_and_2.py reduce_ipg_grads,
 *      buffered_reduce_fallback, allreduce_bucket: self.flatten(bucket)). Without ZeRO the engine all-reduces
 *      the 16-bit gradients through buckets of MEMORY_OPT_ALLREDUCE_SIZE = 500,000,000 elements, flattened the
 *      same way (engine.py buffered_allreduce_fallback, allreduce_no_retain). allgather_bucket_size allocates
 *      nothing: the all-gather after the step writes into views of the flat 16-bit group.
 *  [DS-norm] microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py @2151c787 and @38327e07,
 *      get_grad_norm_direct: the norm of every gradient of the rank's partition, one at a time, from an fp64
 *      copy (g.data.double().norm(2); torch.linalg.vector_norm(g.data.double()) at @38327e07), before the
 *      flatten of [DS-step]: 8 bytes per element of the largest gradient in the partition (the whole tensor, or
 *      the part of it the partition holds: averaged_gradients are views). With a 250,880-token vocabulary
 *      split over tp 8 the embedding's gradient is 449.6M elements at h 14336: 3.6 GB, more than 6 bytes per
 *      parameter of a 4-GB-parameter stage's dp-8 partition. The overflow check before it (has_overflow_
 *      partitioned_grads_serial, x.float()) copies the same tensors at 4 bytes.
 *  [DS-pipe-buf] microsoft/DeepSpeed deepspeed/runtime/pipe/engine.py @2151c787 and @38327e07: _exec_forward_
 *      pass keeps each micro-batch's stage output in pipe_buffers['outputs'][buffer_id] until _exec_backward_
 *      pass sets it to None; with tensor slicing (is_pipe_partitioned: model-parallel size > 1; pipe_partitioned
 *      defaults true at @38327e07) a stage other than the last keeps only its 1/tp part (PartitionedTensor's
 *      local_data, a clone; first_output.data = torch.zeros(1)). A stage other than the first receives its
 *      input into pipe_recv_buf, keeps a clone in the buffer (_exec_recv_activations) and runs the forward on
 *      another clone (inputs = ...clone()): two copies at tp 1; with tp > 1 the gathered full input replaces the
 *      buffer and is the first layer's checkpointed input, one copy. A micro-batch's buffers live from its
 *      forward to its backward: TrainSchedule (schedule.py) reserves max(2, min(stages − stage_id + 1,
 *      micro_batches)) slots and runs 1F1B, so p − r of them are full on pipeline rank r at its peak. Two
 *      buffers are allocated once and kept: pipe_recv_buf (_recv_tensor_meta, the shapes sent: the 1/tp part
 *      with tp > 1) on every stage but the first, and grad_layer (_exec_recv_grads, the partitioned shapes with
 *      is_grad_partitioned) on every stage but the last.
 *  [DS-groups] microsoft/DeepSpeed deepspeed/runtime/pipe/topology.py @2151c787, PipelineParallelGrid: its own
 *      dist.new_group for the model group of each replica (all tp·pp ranks: ZeRO's and the fp16 optimizer's
 *      norm and overflow all-reduces, mpu.get_model_parallel_group), the data-parallel groups (the gradient
 *      reduction), the pipe groups (engine.py _aggregate_total_loss broadcasts the loss over it) and the slice
 *      groups of tp ranks (PartitionedTensor.full() gathers the partitioned pipe tensors over it); pipe/
 *      module.py _index_tied_modules makes one more group for the ranks holding a tied layer (the embedding
 *      on the first and last stage), all-reduced in ReduceTiedGrads; Megatron's own tensor-parallel group
 *      (bigscience-workshop/Megatron-DeepSpeed megatron/mpu/initialize.py @541b967f) carries the layers'
 *      all-reduces. Each process group is its own NCCL communicator (PyTorch's ProcessGroupNCCL), even one
 *      over every rank. pretrain_gpt.py @541b967f builds GPTModelPipe whenever --deepspeed is on, so the
 *      pipeline engine and its grid run even at pp 1.
 *  [MDS-groups] bigscience-workshop/Megatron-DeepSpeed megatron/data/gpt_dataset.py @541b967f,
 *      _build_index_mappings: every rank all-reduces a count over Megatron's data-parallel and then its
 *      pipeline-parallel group (mpu.get_data_parallel_group(), get_pipeline_model_parallel_group(): "This
 *      should be a barrier"), so those two groups of megatron/mpu/initialize.py open communicators of their
 *      own beside the pipeline grid's groups of the same ranks. bigscience-workshop/bigscience train/tr11-200B-ml/
 *      tr11-200B-ml.slurm @217dc6c (2022-02-17), the script of the 02-2022 rows: --train-weighted-split-paths
 *      (build_dataset_group: GPTDataset), ZERO_STAGE=1, --fp16, --checkpoint-activations and --deepspeed-
 *      activation-checkpointing without --partition-activations, no bucket or overlap settings in ds_config.
 *  [MDS-drop] bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py @541b967f: --attention-dropout and
 *      --hidden-dropout default to 0.1, and bigscience-workshop/bigscience train/tr11-176B-ml/README.md
 *      @9e64edec: "The default Megatron-LM dropout settings are inherited". Each dropout keeps a 1-byte mask
 *      (torch's fused dropout): the embedding's over [b, s, h] (megatron/model/language_model.py Embedding,
 *      embedding_dropout; outside every checkpointed layer, so kept for every micro-batch in flight), the two
 *      bias-dropout-adds of each layer over [b, s, h] and the attention probabilities' over [b, a, s, s]
 *      (ParallelAttention, attention_dropout), whose output the bmm with V keeps too (2 bytes).
 *  [MLM-ce] NVIDIA/Megatron-LM megatron/core/tensor_parallel/cross_entropy.py @d98e8a64: the vocab-parallel
 *      cross entropy works in place on one fp32 copy of the 16-bit logits (memory.loss_bytes_per_logit's 6).
 *      Its kernels, eager, per logit element: the .float() copy (read 2, write 4), max (read 4), the in-place
 *      subtraction (4 + 4), exp (4 + 4), sum (4), the division into the softmax (4 + 4): 38 bytes forward;
 *      backward, grad_input.mul_ (4 + 4) and the cast back through .float()'s backward (4 + 2): 14 bytes.
 *  [MLM-fce] NVIDIA/Megatron-LM @d98e8a64: ModelParallelConfig.cross_entropy_loss_fusion = False and
 *      cross_entropy_fusion_impl = 'native' (megatron/core/model_parallel_config.py), --cross-entropy-loss-fusion
 *      and --cross-entropy-fusion-impl {native,te}; megatron/training/arguments.py validate_args asserts not
 *      (cross_entropy_loss_fusion and impl == 'te') ("disabled due to stability issues"), so Megatron-LM's one
 *      fused loss is 'native': megatron/core/fusions/fused_cross_entropy.py, the same VocabParallelCrossEntropy
 *      steps under jit_fuser (torch.compile from PyTorch 2.2, megatron/core/jit.py) with the two sum
 *      all-reduces batched into one: the same fp32 copy saved for the backward (no memory saved), and fused
 *      kernels: .float() with max (2 + 4), subtraction, exp and sum (4 + 4), the division (4 + 4): 22 bytes
 *      forward; the gradient with its bf16 cast (calculate_gradients, 4 + 2): 6 bytes backward.
 *      language_module.py compute_language_model_loss picks te_parallel_cross_entropy, the native fusion or
 *      the unfused loss from these two fields.
 *  [MB-fce] NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/models/gpt_provider.py @067f987d:
 *      cross_entropy_loss_fusion: bool = True ("Generally beneficial"), the impl left at Megatron-Core's
 *      'native'; the DeepSeek and Kimi providers and recipes set 'te' (Megatron-Core only warns, it does not
 *      refuse, model_parallel_config.py), which is not modelled: their plans are priced with the native loss.
 *  [NeMo-fce] NVIDIA/NeMo nemo/collections/llm/gpt/model/base.py @8cfedd72, GPTConfig: cross_entropy_loss_fusion
 *      = True, the impl Megatron-Core's 'native' (deepseek.py sets 'te': not modelled, as [MB-fce]).
 *  [LF-ce] mosaicml/llm-foundry llmfoundry/models/mpt/modeling_mpt.py @8c8dd48f, ComposerMPTCausalLM: loss_fn
 *      = 'fused_crossentropy' by default, flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index,
 *      reduction='none'); 'torch_crossentropy' (nn.CrossEntropyLoss) is the other choice.
 *  [FA-ce] Dao-AILab/flash-attention flash_attn/losses/cross_entropy.py and flash_attn/ops/triton/
 *      cross_entropy.py @0251105a: inplace_backward=False by default; the forward kernel reads each row of the
 *      16-bit logits once and stores an fp32 lse per row, saving the logits and the lse; the backward reads the
 *      logits again and writes dlogits = torch.empty_like(logits): 4 bytes per element at its peak (logits and
 *      their gradient), 2 bytes moved forward and 4 backward (the loss op's own figure).
 *  [ATen-ce] torch.nn.functional.cross_entropy over pred.float() ([TT-loss]; llm-foundry's torch_crossentropy
 *      under bf16 autocast, which runs cross_entropy in fp32): the cast (2 + 4), log_softmax reading its
 *      input twice (max, sum of exp) and writing its output (4 + 4 + 4): 18 bytes forward; nll_loss's
 *      backward filling a dense fp32 gradient (4), log_softmax's backward reading it for the row sums and
 *      again with the saved output and writing the input gradient (4 + 4 + 4 + 4), the cast back (4 + 2):
 *      26 bytes backward (a derivation from the kernels' reads and writes, not a measurement).
 *  [TT-chunk] pytorch/torchtitan @b5bcd76c torchtitan/components/loss.py ChunkedLossWrapper (num_chunks 8 by
 *      default; added in 9530a874, June 2026, #3779), the loss every model's base config in
 *      models/MODEL/config_registry.py wraps around CrossEntropyLoss: the decoder's forward stops before lm_head
 *      (decoder.py _skip_lm_head, set by trainer.py), the hidden states [T, D] are detached and split into
 *      num_chunks equal slices along the tokens, and for each slice lm_head, the loss and its backward run at
 *      once (chunk_loss.backward()), the slice's input gradient added into an fp32 GradAccumulator the size of
 *      the hidden states; the decoder's backward then takes the accumulated gradient. So one slice's logits and
 *      loss tensors live at a time and no logits are saved for the backward pass; the head's FLOP and the loss's
 *      bytes per logit are the unfused loss's ([ATen-ce]: cross_entropy_loss over pred.float() per slice), and
 *      the fp32 accumulator (4 bytes per hidden element) is added. The slices must divide the tokens
 *      (torch._check "sequence length must be divisible by num_chunks"). Its lm_head is not compiled. Not
 *      modelled: the head's backward moving into the forward pass (the same FLOP) and the accumulator's traffic
 *      (12 bytes per hidden element, under 1% of the loss's for a vocabulary 16 times the width). This is the
 *      stack's fused loss (the plan's fused_loss); validate's torchtitan rows (releases of 2024-2025, before
 *      it) ran the unfused CrossEntropyLoss, which stays the default when a plan does not say.
 *  [TT-rc] pytorch/torchtitan @b5bcd76c torchtitan/distributed/activation_checkpoint.py: FullAC (every layer),
 *      SelectiveAC (per op), MemoryBudgetAC; no policy recomputes only some of a chunk's layers.
 *  [DS-rc] deepspeedai/DeepSpeed @edaa7221: the config's activation_checkpointing keys (partition_activations,
 *      contiguous_memory_optimization, number_checkpoints, synchronize_checkpoint_boundary, profile,
 *      cpu_checkpointing; runtime/activation_checkpointing/config.py) say how checkpoints are kept, not which
 *      layers recompute; PipelineModule(activation_checkpoint_interval=k) (runtime/pipe/module.py) checkpoints
 *      every run of k layers of a stage, so every layer recomputes; bigscience-workshop/Megatron-DeepSpeed
 *      @8387ae17 megatron/model/transformer.py _checkpointed_forward checkpoints the layers in chunks of
 *      --checkpoint-num-layers ("chunk size (number of layers) for checkpointing", megatron/arguments.py), all
 *      of them. Neither recomputes only the first k layers of a stage.
 *  [DS-loss] deepspeedai/DeepSpeed @edaa7221: the engine runs the user's module and its loss; the config has no
 *      loss key (the TiledFusedLogitsLoss of deepspeed/runtime/sequence_parallel/ulysses_sp.py is model code for
 *      Ulysses sequence parallelism), so plain DeepSpeed runs none here; Megatron-DeepSpeed's loss flags are
 *      not verified (none).
 *  [TT-loss] pytorch/torchtitan torchtitan/components/loss.py @b5bcd76c, cross_entropy_loss: cross_entropy over
 *      pred.float(); the trainer drops the 16-bit logits before the backward, whose peak holds the saved fp32
 *      log-softmax output, its incoming gradient and the input gradient (aten log_softmax_backward): 12 bytes
 *      per logit element. run_train.sh @b5bcd76c launches with PYTORCH_ALLOC_CONF="expandable_segments:True".
 *  [BS-ctx] bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md @053adafe: "40GB A100 takes
 *      1573MiB for cuda kernels (probably about the same for 80GB ...)", measured with torch.ones(1).cuda() and
 *      nvidia-smi on the 2022 software the megatron-deepspeed rows ran (CUDA 11, every module loaded at start):
 *      the whole context, which takes the place of memory.context_bytes; CUDA 11.7 and later load modules
 *      lazily (CUDA_MODULE_LOADING=LAZY, PyTorch's default since 2.0), which memory.context_bytes counts.
 *  [MLM-moe-sync] NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py @d98e8a64: the
 *      all-to-all dispatcher copies the tokens per expert (the all-to-all's input and output splits, the grouped
 *      GEMM's token counts) to the host on a side stream and waits for them (_maybe_dtoh_and_synchronize,
 *      d2h_event.synchronize()) at cuda_sync_point, set to before_ep_alltoall with ep or tp > 1 and to
 *      before_finish otherwise, unless expert inputs are padded to capacity (moe_pad_expert_input_to_capacity);
 *      the all-gather dispatcher calls tokens_per_expert .cpu(); experts.py passes the counts to Transformer
 *      Engine's grouped GEMM as a host list (tokens_per_expert.tolist()). So every dropless MoE layer's forward
 *      waits for the GPU. Megatron-Bridge (its MoE perf configs, e.g. scripts/performance/
 *      configs/qwen3/workload_base_configs.py @v0.2.0: the recipe's alltoall dispatcher, flex with hybridep on
 *      GB200, CUDA graphs of moe_router and moe_preprocess only, which keep the wait) and NeMo run Megatron-
 *      Core's MoE layer. DeepSpeed's MoE pads to capacity and
 *      torchtitan's is not verified: not marked.
 *  [DS-p2p] deepspeedai/DeepSpeed deepspeed/runtime/pipe/p2p.py (commit not pinned): send and recv move one
 *      tensor with torch.distributed.send/recv to the neighbouring stage's rank (a broadcast in a two-rank group
 *      on PyTorch before 1.8); PyTorch's ProcessGroupNCCL opens one communicator per pair of peers for a single
 *      send/recv (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, getKeySendRecv; commit not pinned).
 *  [MLM-p2p] Megatron-Core megatron/core/model_parallel_config.py: batch_p2p_comm = True ("Use batch_isend_irecv
 *      instead of individual isend/irecv calls"), overlap_p2p_comm = False; torch.distributed.pipelining's
 *      schedules batch their sends and receives the same way (torchtitan's pipelines); ProcessGroupNCCL runs a
 *      batched P2P on the group's own communicator, as a collective (commit not pinned). */
#include <stdio.h>
#include <string.h>

#include "plan/stack.h"

#define SCH(x) (1u << PLAN_SCHED_##x)
#define RC(x) (1u << PLAN_RECOMPUTE_##x)
#define ALL_SCHED ((1u << PLAN_SCHED_COUNT_) - 1)
#define ALL_RC ((1u << PLAN_RECOMPUTE_COUNT_) - 1)
#define Z(a) (1u << (a))
/* Gradient bytes per precision: bf16, fp16, fp8 (fp8 GEMMs within bf16 training keep bf16's). */
#define GRADS(b, f, e) {[PLAN_PREC_BF16] = b, [PLAN_PREC_FP16] = f, [PLAN_PREC_FP8] = e}
#define G(g) {g, 0, 0, false}
#define GB(g, u, upp) {g, u, upp, false}
/* DeepSpeed's BF16_Optimizer without ZeRO: bf16 gradients, fp32 accumulators, its own ZeRO-1 [DS-bf16]. */
#define GZ1(g, u) {g, u, 0, true}
/* Memory mechanisms (plan_stack_mem): DeepSpeed's optimizers [DS-step] [DS-bucket] [DS-norm] (ZeRO-1 with
 * contiguous gradients in today's DeepSpeed, without in the 2022 one BigScience ran), its pipeline's single
 * send/recv [DS-p2p] (Megatron's and torchtitan's pipelines batch theirs [MLM-p2p]), buffers [DS-pipe-buf] and
 * process groups [DS-groups] (at every pp and with Megatron's own, for Megatron-DeepSpeed [MDS-groups]) and
 * BigScience's context [BS-ctx]; torchtitan's loss [TT-loss]; llm-foundry's unfused torch_crossentropy [LF-ce], the same ATen path
 * as torchtitan's (12 bytes; its default fused loss is plan_stack_loss's). */
#define MEM_DEFAULT {0, 0, 0, 0, false, 0, false, 0, false, false, PLAN_GROUPS_PLAIN}
#define MEM_DEEPSPEED {6.0, 8.0, 5e8, 0, false, 0, true, 8.0, true, true, PLAN_GROUPS_DS_PIPE}
#define MEM_BIGSCIENCE {6.0, 8.0, 5e8, 0, false, 1573.0 * 1048576.0, true, 8.0, true, false, PLAN_GROUPS_MDS}
#define MEM_TORCHTITAN {0, 0, 0, 12.0, true, 0, false, 0, false, false, PLAN_GROUPS_PLAIN}
#define MEM_LLM_FOUNDRY {0, 0, 0, 12.0, false, 0, false, 0, false, false, PLAN_GROUPS_PLAIN}
/* Losses (plan_stack_loss): fused by default, fused bytes per logit, unfused forward and backward bytes moved,
 * fused ones, the fused loss's chunks. Megatron's unfused and native fused [MLM-ce] [MLM-fce]; PyTorch's
 * [ATen-ce]; torchtitan's chunked one, the same ATen loss per slice [TT-chunk]; flash-attn's [FA-ce]; an
 * in-place fused kernel (2 bytes: the logits) at the loss op's own traffic for autopar and any. */
#define LOSS_MEGATRON(def) {def, 0, 38.0, 14.0, 22.0, 6.0, 0}
#define LOSS_TORCHTITAN {false, 0, 18.0, 26.0, 18.0, 26.0, PLAN_STACK_TT_LOSS_CHUNKS}
#define LOSS_LLM_FOUNDRY {true, 4.0, 18.0, 26.0, 0, 0, 0}
#define LOSS_OWN {false, 0, 0, 0, 0, 0, 0}
#define LOSS_IN_PLACE {false, 2.0, 0, 0, 0, 0, 0}
/* The last columns of a row: a different full-recompute count per chunk [MLM-rc]; the first k layers of
 * each chunk [MLM-rc] (Megatron's block method), which torchtitan [TT-rc] and DeepSpeed [DS-rc] do not run;
 * whether its runs keep dropout on (Megatron-DeepSpeed [MDS-drop]; false where a row leaves it out). */

static const plan_stack_info stacks[PLAN_STACK_DEFAULT] = {
    [PLAN_STACK_MEGATRON_LM] = {"megatron-lm", SCH(1F1B) | SCH(INTERLEAVED_1F1B), Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1),
                                RC(NONE) | RC(SELECTIVE) | RC(OP) | RC(FULL), true, true, true, true, true, 0,
                                "Transformer Engine fused attention", GRADS(G(4), G(2), G(4)),
                                "[MLM-sched] [MLM-args] [MLM-rc] [MLM-ddp] [MLM-ce] [MLM-fce]", MEM_DEFAULT, false, false, false,
                                LOSS_MEGATRON(false), true, false, true},
    [PLAN_STACK_MEGATRON_BRIDGE] = {"megatron-bridge", SCH(1F1B) | SCH(INTERLEAVED_1F1B), Z(0) | Z(1) | Z(2) | Z(3),
                                    Z(0) | Z(1), RC(NONE) | RC(SELECTIVE) | RC(OP) | RC(FULL), true, true, true, true,
                                    true, 1,
                                    "Transformer Engine fused attention", GRADS(G(2), G(2), G(2)),
                                    "[MLM-sched] [MLM-ddp] [MB-mp] [MLM-fce] [MB-fce]", MEM_DEFAULT, false, false, false,
                                    LOSS_MEGATRON(true), true, false, true},
    [PLAN_STACK_NEMO] = {"nemo", SCH(1F1B) | SCH(INTERLEAVED_1F1B), Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1),
                         RC(NONE) | RC(SELECTIVE) | RC(OP) | RC(FULL), true, true, true, true, true, 0,
                         "Transformer Engine fused attention", GRADS(G(4), G(2), G(4)), "[MLM-sched] [NeMo-mp] [MLM-fce] [NeMo-fce]", MEM_DEFAULT, false, false,
                         false, LOSS_MEGATRON(true), true, false, true},
    [PLAN_STACK_MEGATRON_DEEPSPEED] = {"megatron-deepspeed", SCH(1F1B), Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1),
                                       RC(NONE) | RC(SELECTIVE) | RC(FULL), true, true, false, false, false, 0,
                                       "unfused: baddbmm, fused scale-mask-softmax, bmm",
                                       GRADS(GZ1(2, 4), G(2), GZ1(2, 4)),
                                       "[DS-pipe] [DS-engine] [DS-bf16] [DS-fp16] [DS-step] [DS-bucket] [DS-norm] "
                                       "[DS-pipe-buf] [DS-groups] [MDS-groups] [BS-ctx] [MDS-attn] [MDS-drop] [DS-rc]",
                                       MEM_BIGSCIENCE, true, false, true, LOSS_OWN, false, false, false, true},
    [PLAN_STACK_TORCHTITAN] = {"torchtitan", SCH(GPIPE) | SCH(1F1B) | SCH(INTERLEAVED_1F1B) | SCH(ZB_V),
                               Z(0) | Z(2) | Z(3), Z(0) | Z(2) | Z(3), RC(NONE) | RC(OP) | RC(FULL), true, true, true,
                               true, true, 0, "PyTorch SDPA (flash: FlashAttention-2)",
                               GRADS(GB(4, 0, 4), GB(4, 0, 4), GB(4, 0, 4)),
                               "[TT] [TT-loss] [ATen-ce] [TT-chunk] [TT-rc] [FA2]", MEM_TORCHTITAN,
                               false, true, false, LOSS_TORCHTITAN, false, false, false},
    [PLAN_STACK_LLM_FOUNDRY] = {"llm-foundry", 0, Z(2) | Z(3), 0, RC(NONE) | RC(FULL), false, false, false, false, true,
                                0, "flash-attn (FlashAttention-2)", GRADS(G(4), G(4), G(4)), "[LF] [LF-ce] [FA-ce] [ATen-ce] [FA2]",
                                MEM_LLM_FOUNDRY, false, true, false, LOSS_LLM_FOUNDRY, false, false, true},
    [PLAN_STACK_DEEPSPEED] = {"deepspeed", SCH(1F1B), Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1), RC(NONE) | RC(FULL), true,
                              false, false, false, false, 0, "the model's own", GRADS(GZ1(2, 4), G(2), GZ1(2, 4)),
                              "[DS-pipe] [DS-engine] [DS-bf16] [DS-fp16] [DS-step] [DS-bucket] [DS-norm] [DS-pipe-buf] "
                              "[DS-groups] [DS-loss] [DS-rc]", MEM_DEEPSPEED,
                              false, false, true, LOSS_OWN, false, false, false},
    [PLAN_STACK_AUTOPAR] = {"autopar", ALL_SCHED, Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1) | Z(2) | Z(3), ALL_RC, true, true,
                            true, true, true, 0, "fused (flash)", GRADS(G(4), G(4), G(4)),
                            "the reference executor: every schedule of plan/schedule.h", MEM_DEFAULT, false, false, false,
                            LOSS_IN_PLACE, false, true, true},
    [PLAN_STACK_ANY] = {"any", ALL_SCHED, Z(0) | Z(1) | Z(2) | Z(3), Z(0) | Z(1) | Z(2) | Z(3), ALL_RC, true, true, true,
                        true, true, 0, "fused (flash)", GRADS(G(4), G(4), G(4)), "the whole space, for what-if studies",
                        MEM_DEFAULT, false, false, false, LOSS_IN_PLACE, false, true, true},
};

const plan_stack_info *plan_stack_get(plan_stack s) { return (unsigned)s < PLAN_STACK_DEFAULT ? &stacks[s] : NULL; }

plan_stack plan_stack_default(bool transformer) { return transformer ? PLAN_STACK_MEGATRON_LM : PLAN_STACK_AUTOPAR; }

plan_stack plan_stack_of_export(const char *format) {
  if (!format) return PLAN_STACK_COUNT_;
  if (strcmp(format, "megatron") == 0) return PLAN_STACK_MEGATRON_LM;
  if (strcmp(format, "deepspeed") == 0) return PLAN_STACK_DEEPSPEED;
  if (strncmp(format, "torchtitan", 10) == 0) return PLAN_STACK_TORCHTITAN;
  return PLAN_STACK_COUNT_;
}

bool plan_stack_runs(plan_stack s, const plan *p, char *why, size_t n) {
  const plan_stack_info *st = plan_stack_get(s);
  char buf[8];
  if (!why) {
    why = buf;
    n = sizeof buf;
  }
  if (!st) return true; /* not resolved: no restriction */
  if (p->pp > 1 && !st->pipeline) return snprintf(why, n, "%s has no pipeline parallelism", st->name), false;
  if (p->pp > 1 && !(st->schedules >> p->schedule & 1u))
    return snprintf(why, n, "%s does not run the %s schedule", st->name, plan_schedule_name(p->schedule)), false;
  unsigned zmask = p->pp > 1 ? st->zero_with_pp : st->zero;
  if (p->zero_stage < 0 || p->zero_stage > 3 || !(zmask >> p->zero_stage & 1u))
    return snprintf(why, n, "%s does not run ZeRO-%d%s", st->name, (int)p->zero_stage,
                    p->pp > 1 ? " with pipeline parallelism" : ""),
           false;
  if (!(st->recompute >> p->recompute & 1u))
    return snprintf(why, n, "%s has no %s recompute", st->name, plan_recompute_name(p->recompute)), false;
  if (p->tp > 1 && !st->tensor_parallel) return snprintf(why, n, "%s has no tensor parallelism", st->name), false;
  if (p->cp > 1 && !st->context_parallel) return snprintf(why, n, "%s has no context parallelism", st->name), false;
  if (p->ep > 1 && !st->expert_parallel) return snprintf(why, n, "%s has no expert parallelism", st->name), false;
  if (p->fused_loss && !st->fused_loss) return snprintf(why, n, "%s has no fused in-place loss", st->name), false;
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0 && !st->partial_recompute)
    return snprintf(why, n, "%s recomputes every layer of a chunk or none, not only the first %d (stack.c [TT-rc] [DS-rc])",
                    st->name, (int)p->recompute_layers),
           false;
  if (p->n_chunk_recompute > 1 && !st->chunk_recompute)
    for (int32_t c = 1; c < p->n_chunk_recompute; c++)
      if (p->chunk_recompute_layers[c] != p->chunk_recompute_layers[0])
        return snprintf(why, n, "%s takes one recompute layer count for every pipeline chunk [MLM-rc]", st->name), false;
  return true;
}

bool plan_stack_runs_fixed(plan_stack s, const plan *fixed, unsigned mask, char *why, size_t n) {
  const plan_stack_info *st = plan_stack_get(s);
  if (!st || !mask) return true;
  const plan *f = fixed;
#define FIXES(id) ((mask & PLAN_F(id)) != 0)
  /* pp fixed to 1 makes the schedule and the ZeRO stages with pipelining moot. */
  bool pp1 = FIXES(PP) && f->pp <= 1, pp_many = FIXES(PP) && f->pp > 1;
  if (pp_many && !st->pipeline) return snprintf(why, n, "pp=%lld: %s has no pipeline parallelism", (long long)f->pp, st->name), false;
  if (FIXES(SCHEDULE) && !pp1 && f->schedule != PLAN_SCHED_1F1B && !(st->schedules >> f->schedule & 1u))
    return snprintf(why, n, "schedule=%s: %s does not run the %s schedule", plan_schedule_name(f->schedule), st->name,
                    plan_schedule_name(f->schedule)),
           false;
  if (FIXES(VPP) && f->vpp > 1 && !(st->schedules & (1u << PLAN_SCHED_INTERLEAVED_1F1B | 1u << PLAN_SCHED_ZB_V)))
    return snprintf(why, n, "vpp=%lld: %s runs one stage per pipeline rank (no interleaved or zb-v schedule)",
                    (long long)f->vpp, st->name),
           false;
  if (FIXES(ZERO_STAGE)) {
    unsigned zmask = pp_many ? st->zero_with_pp : pp1 ? st->zero : st->zero | st->zero_with_pp;
    if (f->zero_stage < 0 || f->zero_stage > 3 || !(zmask >> f->zero_stage & 1u))
      return snprintf(why, n, "zero_stage=%d: %s does not run ZeRO-%d%s", (int)f->zero_stage, st->name, (int)f->zero_stage,
                      pp_many ? " with pipeline parallelism" : ""),
             false;
  }
  if (FIXES(RECOMPUTE) && !(st->recompute >> f->recompute & 1u))
    return snprintf(why, n, "recompute=%s: %s has no %s recompute", plan_recompute_name(f->recompute), st->name,
                    plan_recompute_name(f->recompute)),
           false;
  if (FIXES(RECOMPUTE_LAYERS) && f->recompute_layers > 0 && !st->partial_recompute)
    return snprintf(why, n, "recompute_layers=%d: %s recomputes every layer of a chunk or none (stack.c [TT-rc] [DS-rc])",
                    (int)f->recompute_layers, st->name),
           false;
  if (FIXES(TP) && f->tp > 1 && !st->tensor_parallel)
    return snprintf(why, n, "tp=%lld: %s has no tensor parallelism", (long long)f->tp, st->name), false;
  if (FIXES(CP) && f->cp > 1 && !st->context_parallel)
    return snprintf(why, n, "cp=%lld: %s has no context parallelism", (long long)f->cp, st->name), false;
  if (FIXES(EP) && f->ep > 1 && !st->expert_parallel)
    return snprintf(why, n, "ep=%lld: %s has no expert parallelism", (long long)f->ep, st->name), false;
  if (FIXES(FUSED_LOSS) && f->fused_loss && !st->fused_loss)
    return snprintf(why, n, "fused_loss=1: %s has no fused loss", st->name), false;
#undef FIXES
  return true;
}

bool plan_stack_fused_default(plan_stack s) {
  const plan_stack_info *st = plan_stack_get(s);
  return st && st->fused_loss && st->loss.fused_default;
}

/* The loss op's own traffic (model/graph.c OP_LOSS: the 16-bit logits read once forward, twice backward), which
 * a stack's 0 stands for, and the least bytes per logit any loss keeps: the 16-bit logits. */
static const double OWN_FWD_BYTES = 2.0, OWN_BWD_BYTES = 4.0, LOGIT_BYTES = 2.0;

bool plan_stack_fused_dominates(plan_stack s) {
  const plan_stack_info *st = plan_stack_get(s);
  if (!st || !st->fused_loss) return false;
  const plan_stack_loss *l = &st->loss;
  /* Memory: 0 keeps what the unfused loss keeps; otherwise no more than the unfused loss's bytes, known from
   * the stack's row or, when the row leaves them to the cost model, no more than the logits themselves. */
  double un = st->mem.loss_bytes_per_logit;
  bool mem_ok = l->fused_bytes_per_logit <= 0 || l->fused_bytes_per_logit <= (un > 0 ? un : LOGIT_BYTES);
  double uf = l->unfused_fwd_bytes > 0 ? l->unfused_fwd_bytes : OWN_FWD_BYTES;
  double ub = l->unfused_bwd_bytes > 0 ? l->unfused_bwd_bytes : OWN_BWD_BYTES;
  double ff = l->fused_fwd_bytes > 0 ? l->fused_fwd_bytes : OWN_FWD_BYTES;
  double fb = l->fused_bwd_bytes > 0 ? l->fused_bwd_bytes : OWN_BWD_BYTES;
  return mem_ok && ff <= uf && fb <= ub;
}

bool plan_stack_search_fused(plan_stack s) { return plan_stack_fused_dominates(s) || plan_stack_fused_default(s); }

plan_stack_grad_bytes plan_stack_grads(const plan *p) { return plan_stack_grads_on(p, p->stack); }

plan_stack_grad_bytes plan_stack_grads_on(const plan *p, plan_stack stack) {
  const plan_stack_info *st = plan_stack_get(stack);
  if (!st) st = &stacks[PLAN_STACK_ANY];
  plan_stack_grad_bytes g = st->grad[(unsigned)p->precision < PLAN_PREC_COUNT_ ? p->precision : PLAN_PREC_BF16];
  if (p->pp <= 1) g.unsharded_pp = 0;
  if (p->zero_stage > 0) g.unsharded = 0, g.zero1_without_zero = false; /* the ZeRO optimizer keeps gradients in
                                                                          * the model dtype [DS-engine] */
  return g;
}
