/* The cost model's tunable constants (cost layer): one table, cost_tuning_params, with each constant's name,
 * scope, unit, physical range, documented default and the source of that default with its TUNING: reason.
 * Everything else derives from it: the defaults of compute_tuning, comm_tuning, memory_tuning and
 * overlap_tuning; the keys and ranges of calibration files (calib.c); which constants `autopar calibrate` fits
 * and in what order (report/calibrate.c). Constants of the search strategies (how far they look) are not
 * cost-model constants and stay beside their strategy. */
#include <string.h>

#include "cost/cost.h"

#define C(field) offsetof(cost_tuning, compute.field)
#define M(field) offsetof(cost_tuning, comm.field)
#define MEM(field) offsetof(cost_tuning, memory.field)
#define OV(field) offsetof(cost_tuning, overlap.field)
#define GiB 1073741824.0

/* The constants that calibration files carry come first, in the order the files list them (calib_params);
 * fit_time and fit_memory give the order in which the two fits of report/calibrate.c adjust them. */
static const cost_tuning_param params[] = {
    /* ---- per device type: compute_tuning ---- */
    {"gemm_eff_max", COST_SCOPE_DEVICE, C(gemm_eff_max), "1", 0.15, 1.0, 0.75, true, 1, 0,
     "TUNING: cuBLASLt bf16 GEMMs of transformer shapes on an H200 reach 0.66-0.82 of dense peak, median 0.68 "
     "(data/profiles/h200.json, measured by tools/gpuprof); 0.75 is the large-shape level."},
    {"attn_fwd_eff", COST_SCOPE_DEVICE, C(attn_fwd_eff), "1", 0.1, 1.0, 0.6, true, 2, 0,
     "TUNING: FlashAttention-2 reaches 50-73% of A100 peak forward (Dao 2023, §4.1, Fig. 4); FlashAttention-3 on "
     "H100 bf16 0.6-0.75 forward (Shah et al. 2024, §4.1)."},
    {"attn_bwd_eff", COST_SCOPE_DEVICE, C(attn_bwd_eff), "1", 0.1, 1.0, 0.45, true, 0, 0,
     "TUNING: FlashAttention-2 reaches 40-63% of A100 peak backward (Dao 2023, §4.1, Fig. 4); the calibration "
     "keeps it at this ratio to the forward one."},
    {"mem_eff", COST_SCOPE_DEVICE, C(mem_eff), "1", 0.2, 1.0, 0.7, true, 3, 0,
     "TUNING: elementwise and RMSNorm kernels over large buffers reach 0.86-0.87 of HBM bandwidth on an H200 "
     "(data/profiles/h200.json \"memory\"); fused framework kernels are less regular, so 0.7."},
    {"fp8_gemm_speedup", COST_SCOPE_DEVICE, C(fp8_gemm_speedup), "1", 1.0, 2.0, 1.8, true, 4, 0,
     "TUNING: the H200 profile measures fp8 GEMMs at a median 0.663 of the fp8 peak against 0.685 of the bf16 "
     "peak for bf16, i.e. 1.94x; the casts are costed on their own (compute_op), the scaling bookkeeping of "
     "training (amax histories, scale updates) costs a little more, so 1.8; at most the 2x of the fp8 peak."},
    {"moe_gemm_factor", COST_SCOPE_DEVICE, C(moe_gemm_factor), "1", 0.05, 1.0, 0.8, true, 5, 0,
     "TUNING: grouped GEMMs over many small experts run below a dense GEMM of the same per-expert shape (token "
     "counts per expert vary, tiles are padded); Megatron's grouped GEMM reports 70-90% of the dense rate "
     "(NVIDIA Megatron-Core MoE docs, moe-grouped-gemm)."},
    {"op_latency_s", COST_SCOPE_DEVICE, C(op_latency_s), "s", 0.0, 2e-5, 4e-6, true, 6, 0,
     "TUNING: the host issues kernels one by one: a CUDA launch costs ~5 us (NVIDIA CUDA C++ best practices "
     "guide, \"kernel launch overhead\") and an eager PyTorch op adds its dispatch on top; 4 us per kernel. A "
     "layer takes at least its kernel count times this (cost_block), whatever the GPU time."},
    {"gemm_fixed_s", COST_SCOPE_DEVICE, C(gemm_fixed_s), "s", 0.0, 2e-5, 3e-6, true, 7, 0,
     "TUNING: every GEMM kernel occupies the device for a fixed time besides its FLOPs: the gap between two "
     "kernels on a stream, the prologue that loads the first tiles and the epilogue that writes the last, and the "
     "partly idle last wave (NVIDIA Deep Learning Performance Guide, \"Matrix multiplication background\", wave "
     "quantization); a few microseconds, 3 us. It matters where GEMMs are small and many: grouped expert GEMMs "
     "run one cuBLAS GEMM per local expert (NVIDIA/TransformerEngine transformer_engine/common/gemm/"
     "cublaslt_gemm.cu @5c62f72, multi_stream_cublas_gemm, over 4 compute streams), so a layer pays it once "
     "per local expert and pass (compute_op)."},
    {"moe_host_s", COST_SCOPE_DEVICE, C(moe_host_s), "s", 0.0, 0.03, 0.006, true, 15, 0,
     "TUNING: the host time of one Megatron-Core MoE layer (attention and MoE, forward and backward) for one "
     "micro-batch. Its forward waits on the tokens per expert every time (plan/stack.c [MLM-moe-sync]), so the "
     "host cannot run ahead of the GPU by more than a layer and the layer takes at least this long (cost_block); "
     "Megatron-Core's MoE guide names this host-bound regime and its remedies, CUDA graphs and larger micro-"
     "batches (megatron/core/transformer/moe/README.md @d98e8a64, \"CPU Overhead Bottleneck\"). Default: several "
     "hundred eager kernels a layer (router, permutation, all-to-alls, per-expert quantisation and grouped "
     "GEMMs, attention; forward and twice backward) at 10-20 us of PyTorch and Python dispatch each, 6 ms; "
     "fitted per chip, since the host CPU comes with the system (DGX H100/B200 Xeon, GB200 Grace)."},
    /* ---- global: communication, overlap, memory ---- */
    {"bus_eff.scale_up", COST_SCOPE_GLOBAL, M(bus_eff[COMM_LINK_SCALE_UP]), "1", 0.05, 1.0, 0.82, true, 8, 0,
     "NVIDIA/nccl-tests#212 (S. Jeaugey, NCCL): H100 NVLink line rate 450 GB/s, about 370 GB/s effective busBw "
     "after protocol overhead with NCCL_ALGO=RING: 370/450 = 0.82. TUNING: ring-class collectives only; NVLink "
     "SHARP all-reduce is faster and not modelled."},
    {"bus_eff.network", COST_SCOPE_GLOBAL, M(bus_eff[COMM_LINK_NETWORK]), "1", 0.05, 1.0, 0.90, true, 9, 0,
     "NVIDIA/nccl-tests#267 (NCCL team): ConnectX-7 at 400 Gb/s NDR reaches 48-49 of 50 GB/s per NIC; "
     "NVIDIA/nccl#1576: DGX-A100 with 8 x 200 Gb/s gives 192 GB/s all-reduce busBw (0.96). TUNING: 0.9, below "
     "those two-node figures, for the routing and congestion losses of larger jobs; calibrate."},
    {"overlap.tp", COST_SCOPE_GLOBAL, OV(tp_overlap), "1", 0.0, 1.0, 0.8, true, 10, 0,
     "TUNING: Megatron's userbuffers TP overlap hides most of the all-gather/reduce-scatter behind the GEMMs "
     "(Wang et al. 2023, \"Overlap communication with dependent computation\", ~80%)."},
    {"overlap.dp", COST_SCOPE_GLOBAL, OV(dp_overlap), "1", 0.0, 1.0, 0.9, true, 11, 0,
     "TUNING: bucketed gradient reduce-scatter overlaps the backward of the last micro-batch except its last "
     "bucket (Megatron --overlap-grad-reduce, ddp bucket 40M parameters)."},
    {"overlap.zero3", COST_SCOPE_GLOBAL, OV(zero3_overlap), "1", 0.0, 1.0, 0.7, true, 12, 0,
     "TUNING: ZeRO-3 (FSDP FULL_SHARD) gathers each layer's parameters just before its forward and its backward, "
     "every micro-batch: the gathers sit on the critical path of the layer they feed and prefetch hides them one "
     "layer ahead only, while the NCCL kernels share SMs and HBM with the GEMMs (FSDP paper, Zhao et al. 2023, "
     "§3.3 and §7.2: overlap is partial and falls with small per-layer compute); 0.7."},
    {"overlap.cp", COST_SCOPE_GLOBAL, OV(cp_overlap), "1", 0.0, 1.0, 0.9, true, 0, 0,
     "TUNING: ring attention sends the next KV block while computing on the current one (Liu et al. 2023, Ring "
     "Attention §3); hidden when attention compute per step exceeds the transfer."},
    {"overlap.ep", COST_SCOPE_GLOBAL, OV(ep_overlap), "1", 0.0, 1.0, 0.0, true, 13, 0,
     "TUNING: without dedicated A2A overlap the dispatch/combine all-to-alls are exposed."},
    {"overlap.pp", COST_SCOPE_GLOBAL, OV(pp_overlap), "1", 0.0, 1.0, 0.8, true, 14, 0,
     "TUNING: Megatron overlaps pipeline send/recv with compute in the steady state (--overlap-p2p-comm)."},
    {"memory.overhead_bytes", COST_SCOPE_GLOBAL, MEM(overhead_bytes), "bytes", 0.0, 16.0 * GiB, 0.5 * GiB, true, 0, 0,
     "TUNING: cuBLAS/cuDNN workspaces and framework buffers inside the allocator: cuBLAS takes up to 32 MiB of "
     "workspace per stream (CUDA toolkit docs, cublasSetWorkspace) and fused kernels keep a few more buffers; "
     "0.5 GiB."},
    {"memory.context_bytes", COST_SCOPE_GLOBAL, MEM(context_bytes), "bytes", 0.0, 4.0 * GiB, 0.5 * GiB, true, 0, 1,
     "TUNING: the CUDA context, outside the framework's allocator: about 0.5 GiB on Hopper with lazily loaded "
     "modules (stack.c [BS-ctx] for eager loading); NCCL's buffers are memory.comm_bytes per communicator. "
     "PyTorch's reserved-memory figure leaves both out."},
    {"memory.comm_bytes", COST_SCOPE_GLOBAL, MEM(comm_bytes), "bytes", 0.0, 4.0 * GiB, 0.6 * GiB, true, 0, 0,
     "NVIDIA/nccl#964 (2023): on 4 A100 with NVLink, the first 4 MB all-reduce of each PyTorch process group "
     "adds 544 MB of device memory for a group of 2 ranks and 688 MB for more; NVIDIA/nccl#864 (S. Jeaugey): "
     "each communicator has its own buffers, linear in its channels (NCCL_BUFFSIZE, 4 MiB for the Simple "
     "protocol, per channel and peer; NCCL docs, Environment Variables), unless split with shared resources, "
     "which the stacks here do not ask for; up to 4 GiB where many channels connect (NVIDIA/nccl#1685: an "
     "all-to-all over 32 channels on 8 H100 took 3.3 GB). TUNING: 0.6 GiB, between the two A100 figures, "
     "and kept there, not fitted: only BigScience's nvidia-smi peaks see it, and the memory fit, which keeps "
     "every measured run fitting, traded it against the classic reserve around one llm-foundry row at the edge "
     "of an A100-40GB, down to 0.17 GB with those rows 5% under. Which communicators a rank holds: memory.c, "
     "cost_nccl_comms."},
    {"memory.reserve_fraction", COST_SCOPE_GLOBAL, MEM(reserve_fraction), "1", 0.0, 1.0, 0.15, true, 0, 3,
     "TUNING: the PyTorch caching allocator keeps freed blocks cached and splits large ones, so what it reserves "
     "exceeds the live tensors; the excess comes from the blocks allocated and freed through the iteration "
     "(activations, logits, buffers, the step's copies), not from the states allocated once (c10/cuda/"
     "CUDACachingAllocator.cpp: blocks over 1 MiB rounded to 2 MiB, segments released only when an allocation "
     "fails); reserved exceeds allocated by 5-20% of the total in published runs (PyTorch docs, \"CUDA memory "
     "management\"), 0.15 of the transient bytes. Fitted to the measured peaks of runs.csv (`autopar calibrate`, "
     "memory fit)."},
    {"memory.expandable_reserve_fraction", COST_SCOPE_GLOBAL, MEM(expandable_reserve_fraction), "1", 0.0, 1.0,
     0.075, true, 0, 4,
     "TUNING: the allocator reserve, as memory.reserve_fraction, of a stack that launches with "
     "expandable_segments:True: the allocator maps a block's pages into one growing segment instead of caching "
     "whole segments (PyTorch docs, \"CUDA memory management\", expandable_segments; pytorch/pytorch#96995), "
     "which removes the fragmentation between segments but not the freed blocks it caches; half the classic "
     "default, 0.075. A mechanism of its own, fitted on its own rows (torchtitan's reserved bytes): tied to the "
     "classic reserve as a factor of it, the fit could not give torchtitan the reserve its rows show once the "
     "BigScience rows' reserve fell with their pipeline buffers, masks and communicators modelled."},
    {"memory.loss_bytes_per_logit", COST_SCOPE_GLOBAL, MEM(loss_bytes_per_logit), "bytes", 2.0, 16.0, 6.0, true, 0, 0,
     "TUNING: Megatron's vocab-parallel cross entropy (tensor_parallel/cross_entropy.py), unfused or under "
     "--cross-entropy-loss-fusion native, works in place on one fp32 copy of the 16-bit logits: 2 + 4 = 6 bytes "
     "per element; it applies to stacks whose row in plan/stack.c states no loss bytes. Other losses are in that "
     "table: flash-attn's cross entropy (llm-foundry's fused_crossentropy) keeps the logits and a 16-bit "
     "gradient, 4 bytes; PyTorch's cross_entropy over logits upcast to fp32 (torchtitan, llm-foundry's "
     "torch_crossentropy) holds at its backward the log-softmax output, the incoming and the input gradient, 4 "
     "bytes each (aten log_softmax_backward), 12 in all; a calibration file sets it for other code."},
    /* ---- not in calibration files: fixed by their sources ---- */
    {"gemm_dim_half", COST_SCOPE_DEVICE, C(gemm_dim_half), "elements", 1.0, 65536.0, 256.0, false, 0, 0,
     "TUNING: in the H200 profile a GEMM with one dimension of 1024 runs at about 0.55-0.6 of the large-shape "
     "rate; a shape factor d/(d + 256) per dimension gives 0.8 at 1024 and 0.94 at 4096."},
    {"bus_eff.pcie", COST_SCOPE_GLOBAL, M(bus_eff[COMM_LINK_PCIE]), "1", 0.05, 1.0, 0.80, false, 0, 0,
     "TUNING: PCIe packet (TLP/DLLP) overhead leaves about 80% of the line rate for payload; no NCCL measurement "
     "at hand, so the NVLink figure's order is kept. UNSURE: calibrate on a PCIe machine."},
    {"tree_bw_factor", COST_SCOPE_GLOBAL, M(tree_bw_factor), "1", 0.1, 1.0, 0.92, false, 0, 0,
     "NVIDIA/nccl src/graph/tuning.cc (COSTMODEL.md §4.3): tree all-reduce bandwidth is min(busBw * 0.92, "
     "per-channel cap) where ring/Simple keeps busBw. TUNING: NCCL's own ratio; its mid-size dip "
     "(treeCorrectionFactor) is left out."},
    {"call_latency_s", COST_SCOPE_GLOBAL, M(call_latency_s), "s", 0.0, 1e-3, 8.4e-6, false, 0, 0,
     "NVIDIA/nccl src/graph/tuning.cc baseLatencies, Ring and Tree with the Simple protocol: 8.4 us per call "
     "(COSTMODEL.md §4.3). TUNING: the cluster presets' per-step latencies are NCCL's Simple hwLat, so the base of "
     "the same protocol goes with them."},
    {"memory.grad_bytes_per_param", COST_SCOPE_GLOBAL, MEM(grad_bytes_per_param), "bytes", 2.0, 4.0, 4.0, false, 0, 0,
     "TUNING: Megatron accumulates gradients in fp32 main_grad buffers (COSTMODEL.md §2.3: 18 = 2 + 4 + 12 "
     "bytes); 2 for a stack that keeps bf16 gradients."},
};

const cost_tuning_param *cost_tuning_params(size_t *n_out, size_t *n_in_files) {
  *n_out = AP_COUNT(params);
  if (n_in_files) {
    size_t n = 0;
    while (n < AP_COUNT(params) && params[n].in_files) n++;
    *n_in_files = n;
  }
  return params;
}

double *cost_tuning_ref(cost_tuning *t, const cost_tuning_param *k) { return (double *)((char *)t + k->offset); }

cost_tuning cost_tuning_defaults(void) {
  cost_tuning t;
  memset(&t, 0, sizeof t);
  for (size_t i = 0; i < AP_COUNT(params); i++) *cost_tuning_ref(&t, &params[i]) = params[i].value;
  return t;
}

compute_tuning compute_tuning_defaults(void) { return cost_tuning_defaults().compute; }
comm_tuning comm_tuning_defaults(void) { return cost_tuning_defaults().comm; }
memory_tuning memory_tuning_defaults(void) { return cost_tuning_defaults().memory; }
overlap_tuning overlap_tuning_defaults(void) { return cost_tuning_defaults().overlap; }
