/* The DeepSpeed exporter (plan layer): a plan as a DeepSpeed JSON config, with the keys DeepSpeed @
 * edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (August 2026) reads (deepspeed/runtime/config.py, constants.py,
 * zero/config.py, precision_config.py, activation_checkpointing/config.py; every key is in
 * tests/data/framework_args.tsv, and the zero, bf16 and fp16 sections forbid unknown keys, config_utils.py
 * extra="forbid").
 *
 * DeepSpeed's config holds the batch, the precision, ZeRO and activation checkpointing; the tensor and
 * pipeline degrees live in model code (Megatron-DeepSpeed's --tensor-model-parallel-size and
 * --pipeline-model-parallel-size, PipelineModule(num_stages=…)). Those go under a top-level "autopar" object,
 * which DeepSpeed does not read (its top-level keys are looked up one by one, unknown ones ignored), so the
 * user can pass them on; docs/exports.md says so. The batch identity DeepSpeed asserts (_batch_assertion:
 * train_batch_size = micro × gradient_accumulation_steps × world_size) takes world_size from
 * mpu.get_data_parallel_world_size() only when deepspeed.initialize is given an mpu (DeepSpeedConfig
 * __init__, config.py); without one it is every rank (divided by sequence_parallel_size). The config holds
 * the identity with the plan's dp, so with tp·pp > 1 it needs the mpu that Megatron-DeepSpeed and
 * PipelineModule pass; the export says so.
 *
 * Not exported (AP_UNSUPPORTED): context parallelism (DeepSpeed's Ulysses splits heads, not the sequence
 * ring), expert parallelism (DeepSpeed-MoE takes ep_size in model code, there are no config keys for it),
 * interleaved and zero-bubble pipeline schedules (the pipeline engine runs one stage per rank, 1F1B), and
 * ZeRO-2/3 with pipeline parallelism (pipe/engine.py asserts "ZeRO-2 and ZeRO-3 are incompatible with
 * pipeline parallelism"). */
#include <stdlib.h>

#include "plan/export.h"

/* TUNING: DeepSpeed's own defaults for the ZeRO buckets (zero/config.py: reduce_bucket_size and
 * allgather_bucket_size 5e8 elements, stage3_prefetch_bucket_size 5e7), written out so the file shows them. */
#define DS_BUCKET_ELEMS 500000000
/* The commit every key is read at (tests/data/framework_args.tsv's meta row; the export test checks it). */
#define DS_COMMIT "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
#define DS_PREFETCH_ELEMS 50000000

static ap_status unsupported(ap_ctx *ctx, const char *why) {
  return ctx_fail(ctx, AP_UNSUPPORTED, "deepspeed export: %s", why);
}

static void set_int(json_t *o, const char *k, int64_t v) { json_object_set_new(o, k, json_integer((json_int_t)v)); }
static void set_bool(json_t *o, const char *k, bool v) { json_object_set_new(o, k, json_boolean(v)); }
static void set_str(json_t *o, const char *k, const char *v) { json_object_set_new(o, k, json_string(v)); }

ap_status deepspeed_can_express(ap_ctx *ctx, const plan *p, const graph *g) {
  if (p->cp > 1)
    return unsupported(ctx, "DeepSpeed has no context parallelism (its Ulysses sequence parallelism splits "
                            "attention heads, not the sequence ring)");
  if (p->ep > 1)
    return unsupported(ctx, "DeepSpeed-MoE sets the expert-parallel size in model code (deepspeed.moe.layer.MoE"
                            "(ep_size=...)), not in the config");
  if (p->recompute == PLAN_RECOMPUTE_OP)
    return unsupported(ctx, "Megatron-DeepSpeed has no per-op selective checkpointing (recompute \"op\", "
                            "torchtitan's selective_ac_option op)");
  /* DeepSpeed's activation checkpointing recomputes every layer it checkpoints: PipelineModule's
   * activation_checkpoint_interval groups a stage's layers (runtime/pipe/module.py), Megatron-DeepSpeed's
   * --checkpoint-num-layers is the layers per checkpoint, all of them recomputed (plan/stack.c [DS-rc]). */
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0) {
    int32_t layers[PLAN_MAX_CHUNKS];
    int32_t most = 0;
    if (export_chunk_layers(p, g, layers))
      for (int64_t c = 0; c < plan_n_chunks(p); c++) most = layers[c] > most ? layers[c] : most;
    if (p->recompute_layers < most)
      return ctx_fail(ctx, AP_UNSUPPORTED,
                      "deepspeed export: DeepSpeed cannot recompute only the first %d layers of each stage: its "
                      "activation_checkpoint_interval (runtime/pipe/module.py) and Megatron-DeepSpeed's "
                      "--checkpoint-num-layers group layers per checkpoint and recompute all of them",
                      (int)p->recompute_layers);
  }
  bool pipe = p->pp > 1;
  if (pipe && p->schedule != PLAN_SCHED_1F1B && p->schedule != PLAN_SCHED_GPIPE)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "deepspeed export: DeepSpeed's pipeline engine runs 1F1B with one stage per rank, not %s",
                    plan_schedule_name(p->schedule));
  if (pipe && p->zero_stage >= 2)
    return unsupported(ctx, "ZeRO-2 and ZeRO-3 are incompatible with DeepSpeed pipeline parallelism "
                            "(deepspeed/runtime/pipe/engine.py)");
  return AP_OK;
}

/* How to start the job, for the "autopar" object: the deepspeed launcher on the first node, which starts the
 * others over pdsh from a hostfile (deepspeed/launcher/runner.py: --hostfile, --num_nodes, --num_gpus,
 * --master_addr, --master_port), and, where SLURM allocates the nodes, torchrun under srun with the same c10d
 * rendezvous as the other exports; deepspeed.add_config_arguments gives the script --deepspeed and
 * --deepspeed_config (deepspeed/__init__.py). */
/* Sets key to the text built in sb and empties sb. */
static void set_sb(json_t *o, const char *k, strbuf *sb) {
  set_str(o, k, sb->buf && !sb->oom ? sb->buf : "");
  sb_free(sb);
}

static void put_launch(json_t *ap, const export_launch *l) {
  json_t *o = json_object();
  strbuf sb = {0};
  if (l->n_nodes <= 1) {
    set_str(o, "rendezvous", "one node: the launcher sets MASTER_ADDR=localhost itself");
    sb_printf(&sb, "deepspeed --num_gpus %lld TRAIN.py --deepspeed --deepspeed_config THIS.json", (long long)l->per_node);
    set_sb(o, "deepspeed", &sb);
  } else {
    sb_printf(&sb, "%lld nodes: the first node is the rendezvous (MASTER_ADDR, port %d); the deepspeed launcher, run "
                   "there once, starts every node over pdsh from HOSTFILE (one line per node: \"HOST slots=%lld\") "
                   "and gives each its node rank; under SLURM every node runs the srun line's torchrun, whose c10d "
                   "rendezvous numbers the nodes",
              (long long)l->n_nodes, EXPORT_RDZV_PORT, (long long)l->per_node);
    set_sb(o, "rendezvous", &sb);
    sb_printf(&sb, "deepspeed --hostfile HOSTFILE --num_nodes %lld --num_gpus %lld --master_addr FIRST_NODE "
                   "--master_port %d TRAIN.py --deepspeed --deepspeed_config THIS.json",
              (long long)l->n_nodes, (long long)l->per_node, EXPORT_RDZV_PORT);
    set_sb(o, "deepspeed", &sb);
    sb_printf(&sb, "srun --nodes %lld --ntasks-per-node 1 ", (long long)l->n_nodes);
    export_torchrun(l, "$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)", &sb);
    sb_puts(&sb, " TRAIN.py --deepspeed --deepspeed_config THIS.json");
    set_sb(o, "slurm", &sb);
  }
  json_object_set_new(ap, "launch", o);
}

ap_status export_deepspeed(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out) {
  ap_status st = deepspeed_can_express(ctx, p, g);
  if (st) return st;
  bool pipe = p->pp > 1;
  /* The micro-batches (DeepSpeed's accumulation steps, also the pipeline engine's micro-batches) and what the
   * pipeline keeps in flight, from the schedule data. DeepSpeed runs a GPipe plan as 1F1B. */
  plan run;
  if (plan_copy(&run, p)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (run.schedule == PLAN_SCHED_GPIPE) run.schedule = PLAN_SCHED_1F1B;
  export_sched sc;
  st = export_schedule_facts(ctx, &run, &sc);
  plan_free(&run);
  if (st) return st;

  json_t *root = json_object();
  set_int(root, "train_batch_size", p->global_batch_size);
  set_int(root, "train_micro_batch_size_per_gpu", p->micro_batch_size);
  set_int(root, "gradient_accumulation_steps", sc.micro_batches);

  /* fp8 GEMMs come from the model code (Transformer Engine) inside bf16 training; the config says bf16. */
  json_t *prec = json_object();
  set_bool(prec, "enabled", true);
  json_object_set_new(root, p->precision == PLAN_PREC_FP16 ? "fp16" : "bf16", prec);

  json_t *zero = json_object();
  set_int(zero, "stage", p->zero_stage);
  set_bool(zero, "overlap_comm", p->overlap_grad_reduce);
  set_bool(zero, "contiguous_gradients", true);
  set_bool(zero, "reduce_scatter", true);
  set_int(zero, "reduce_bucket_size", DS_BUCKET_ELEMS);
  if (p->zero_stage <= 2) {
    set_bool(zero, "allgather_partitions", true);
    set_int(zero, "allgather_bucket_size", DS_BUCKET_ELEMS);
  } else {
    /* Stage 3 gathers parameters ahead of use; without overlap it fetches each on demand. */
    set_int(zero, "stage3_prefetch_bucket_size", p->overlap_param_gather ? DS_PREFETCH_ELEMS : 0);
  }
  /* Offload (ZeRO-Offload, ZeRO-Infinity): zero_optimization.offload_optimizer / offload_param with device cpu
   * or nvme (deepspeedai/DeepSpeed docs/_pages/config-json.md); NVMe needs a path, written as DeepSpeed's
   * documented example /local_nvme, to be set to the node's drive. */
  for (int k = 0; k < 2; k++) {
    plan_offload o = k ? p->offload_param : p->offload_optimizer;
    if (o == PLAN_OFFLOAD_NONE) continue;
    json_t *off = json_object();
    set_str(off, "device", plan_offload_name(o));
    set_bool(off, "pin_memory", true);
    if (o == PLAN_OFFLOAD_NVME) set_str(off, "nvme_path", "/local_nvme");
    json_object_set_new(zero, k ? "offload_param" : "offload_optimizer", off);
  }
  json_object_set_new(root, "zero_optimization", zero);

  bool full_every_layer = p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers == 0;
  if (p->recompute != PLAN_RECOMPUTE_NONE) {
    /* DeepSpeed's checkpointing implementation; which layers recompute is the model code's choice
     * (Megatron-DeepSpeed --recompute-granularity), stated under "autopar". */
    json_t *ac = json_object();
    set_bool(ac, "partition_activations", false);
    set_bool(ac, "contiguous_memory_optimization", false);
    set_bool(ac, "cpu_checkpointing", false);
    set_bool(ac, "synchronize_checkpoint_boundary", false);
    set_bool(ac, "profile", false);
    json_object_set_new(root, "activation_checkpointing", ac);
  }
  if (pipe) {
    json_t *pl = json_object();
    set_int(pl, "activation_checkpoint_interval", full_every_layer ? 1 : 0);
    set_bool(pl, "pipe_partitioned", true);
    set_bool(pl, "grad_partitioned", true);
    json_object_set_new(root, "pipeline", pl);
  }

  /* What DeepSpeed does not read: for the launcher and Megatron-DeepSpeed's own flags. */
  json_t *ap = json_object();
  strbuf sum = {0};
  export_summary(p, g, &sum);
  char *summary = sb_take(&sum);
  set_str(ap, "plan", summary ? summary : "");
  free(summary);
  set_str(ap, "target", "DeepSpeed @ " DS_COMMIT " (August 2026): the keys of deepspeed/runtime/config.py, "
                        "constants.py, zero/config.py, precision_config.py and activation_checkpointing/config.py");
  if (l->planned_for) {
    strbuf nb = {0};
    sb_printf(&nb, "the plan was costed for %s, not deepspeed: DeepSpeed runs it at other figures; to plan for "
                   "deepspeed: %s",
              l->planned_for, l->replan);
    set_sb(ap, "stack_note", &nb);
  }
  put_launch(ap, l);
  set_str(ap, "note", "not read by DeepSpeed: pass these to Megatron-DeepSpeed (--tensor-model-parallel-size, "
                      "--pipeline-model-parallel-size, --sequence-parallel) and launch world_size ranks");
  bool mpu_needed = p->tp * p->pp > 1;
  set_str(ap, "batch_identity",
          mpu_needed ? "train_batch_size = micro x gradient_accumulation_steps x data_parallel holds only when "
                       "deepspeed.initialize(..., mpu=mpu) is given the model-parallel unit (Megatron-DeepSpeed and "
                       "PipelineModule pass one); without an mpu DeepSpeed counts all world_size ranks as data "
                       "parallel and its batch assertion fails"
                     : "train_batch_size = micro x gradient_accumulation_steps x world_size (every rank is data "
                       "parallel, so it holds with or without an mpu)");
  set_int(ap, "world_size", plan_n_devices(p));
  set_int(ap, "data_parallel", p->dp);
  set_int(ap, "tensor_parallel", p->tp);
  set_int(ap, "pipeline_parallel", p->pp);
  set_bool(ap, "sequence_parallel", p->sequence_parallel && p->tp > 1);
  set_int(ap, "seq_length", export_seq_length(p, g));
  if (pipe) {
    int32_t layers[PLAN_MAX_CHUNKS];
    json_t *split = json_array();
    if (export_chunk_layers(p, g, layers))
      for (int64_t c = 0; c < plan_n_chunks(p); c++) json_array_append_new(split, json_integer(layers[c]));
    json_object_set_new(ap, "stage_layers", split);
    if (p->schedule == PLAN_SCHED_GPIPE) set_str(ap, "schedule", "1f1b (DeepSpeed has no GPipe schedule)");
    else set_str(ap, "schedule", plan_schedule_name(sc.kind));
    /* The pipeline engine's schedule (deepspeed/runtime/pipe/schedule.py TrainSchedule) as schedule.c lists it. */
    set_int(ap, "micro_batches", sc.micro_batches);
    set_int(ap, "stage0_in_flight_micro_batches", sc.in_flight_stage0);
  }
  set_str(ap, "recompute", plan_recompute_name(p->recompute));
  if (p->recompute == PLAN_RECOMPUTE_FULL) set_int(ap, "recompute_layers", p->recompute_layers);
  set_str(ap, "precision", plan_precision_name(p->precision));
  if (p->tp_comm_overlap && p->tp > 1) set_bool(ap, "tp_comm_overlap", true);
  /* The loss is the model code's, as recompute is: DeepSpeed's config has no loss key (plan/stack.c [DS-loss]);
   * only a plan of the stacks autopar or any, whose in-place loss the model code must provide, says fused. */
  if (p->fused_loss) set_bool(ap, "fused_loss", true);
  json_object_set_new(root, "autopar", ap);

  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  /* The setters above ignore jansson's failures; a failed allocation on the way means keys are missing. */
  if (!text || mem_failed()) {
    mem_free_json(text);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, text);
  sb_puts(out, "\n");
  mem_free_json(text); /* jansson's allocation */
  return AP_OK;
}
