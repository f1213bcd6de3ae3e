/* The cost model's tunable constants (cost layer): the documented defaults of the memory and overlap constants
 * and of the whole cost_tuning. calib.c reads calibrations on top of them; env.c gives an environment the
 * calibration's values or these. */
#include "cost/cost.h"

memory_tuning memory_tuning_defaults(void) {
  return (memory_tuning){
      /* TUNING: cuBLAS/cuDNN workspaces and framework buffers inside the allocator: cuBLAS takes up to 32 MiB
       * of workspace per stream (CUDA toolkit docs, cublasSetWorkspace) and fused kernels keep a few more
       * buffers; 0.5 GiB. */
      .overhead_bytes = 0.5 * 1073741824.0,
      /* TUNING: the CUDA context takes about 0.5 GiB on Hopper and NCCL's channel buffers a few hundred MiB
       * (NCCL_BUFFSIZE 4 MiB per channel and peer); PyTorch's reserved-memory figure leaves both out. */
      .context_bytes = 0.75 * 1073741824.0,
      /* TUNING: the PyTorch caching allocator needs some slack above live bytes to place a new block; with
       * expandable segments it stays near 5% (PyTorch docs, "CUDA memory management"). */
      .fragmentation = 1.05,
      /* Megatron accumulates gradients in fp32 main_grad buffers (COSTMODEL.md §2.3: 18 = 2 + 4 + 12 bytes). */
      .grad_bytes_per_param = 4,
      /* TUNING: Megatron's fused vocab-parallel cross entropy (tensor_parallel/cross_entropy.py) works in place
       * on one fp32 copy of the 16-bit logits: 2 + 4 = 6 bytes per element. Other losses differ: flash-attn's
       * in-place cross entropy (llm-foundry's fused_crossentropy) keeps about the 2 bytes of the logits;
       * PyTorch's cross_entropy over logits upcast to fp32 (torchtitan, HF Transformers) holds at its backward
       * the log-softmax output, the incoming and the input gradient, 4 bytes each (aten
       * log_softmax_backward), 12 in all; a calibration file sets memory.loss_bytes_per_logit for such a stack
       * (docs/calibration.md). */
      .loss_bytes_per_logit = 6,
      /* TUNING: PyTorch's caching allocator rounds and caches blocks; reserved exceeds allocated by 5-20% in
       * published training runs (PyTorch docs, "CUDA memory management"). */
      .pool_fraction = 0.1,
  };
}

overlap_tuning overlap_tuning_defaults(void) {
  return (overlap_tuning){
      /* TUNING: Megatron's userbuffers TP overlap hides most of the all-gather/reduce-scatter behind the GEMMs
       * (Wang et al. 2023, "Overlap communication with dependent computation", ~80%). */
      .tp_overlap = 0.8,
      /* TUNING: bucketed gradient reduce-scatter overlaps the backward of the last micro-batch except its
       * last bucket (Megatron --overlap-grad-reduce, ddp bucket 40M parameters). */
      .dp_overlap = 0.9,
      /* TUNING: ZeRO-3 (FSDP FULL_SHARD) gathers each layer's parameters just before its forward and its
       * backward, every micro-batch: the gathers sit on the critical path of the layer they feed and prefetch
       * hides them one layer ahead only, while the NCCL kernels share SMs and HBM with the GEMMs (FSDP paper,
       * Zhao et al. 2023, §3.3 and §7.2: overlap is partial and falls with small per-layer compute); 0.7. */
      .zero3_overlap = 0.7,
      /* TUNING: ring attention sends the next KV block while computing on the current one (Liu et al. 2023,
       * Ring Attention §3); hidden when attention compute per step exceeds the transfer. */
      .cp_overlap = 0.9,
      /* TUNING: without dedicated A2A overlap the dispatch/combine all-to-alls are exposed. */
      .ep_overlap = 0.0,
      /* TUNING: Megatron overlaps pipeline send/recv with compute in the steady state (--overlap-p2p-comm). */
      .pp_overlap = 0.8,
  };
}

cost_tuning cost_tuning_defaults(void) {
  return (cost_tuning){compute_tuning_defaults(), comm_tuning_defaults(), memory_tuning_defaults(),
                       overlap_tuning_defaults()};
}
