/* Tests of the exporters (plan layer, export_*.c). Every export of every test passes through check_output:
 * each Megatron-LM flag, DeepSpeed key and torchtitan field must be one the framework defines, with a value
 * of its type, per the table extracted from their sources (tests/data/framework_args.tsv,
 * tools/framework_args/extract.py; tests/export_check.h reads it), and tp·pp·cp·dp, the batch identities and
 * the layer split each framework derives from the text must be the plan's. On top: exact flags for fixed
 * plans, a table of Megatron flag combinations that Megatron rejects (megatron/training/arguments.py,
 * transformer_config.py @ d98e8a64), a set of scenarios over the models of the issue (Llama 3, Qwen3,
 * DeepSeek-V3, Mixtral, GPT-3 …) with the formats each must export to, a sweep over thousands of generated
 * valid plans, the JSON round trip, and each plan a framework cannot run refused with a one-line reason. */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "export_check.h"
#include "export_verify.h"
#include "model/transformer.h"
#include "plan/export.h"
#include "plan/schedule.h"
#include "plan/stack.h"

/* One Megatron export per line: the model, the plan, flags that must be there ("--flag" with any value,
 * "--flag value" exactly) and flags that must not. */
enum { MAX_LIST = 40 };
static const struct {
  int model;
  const char *plan;
  const char *present[MAX_LIST];
  const char *absent[MAX_LIST];
} megatron_cases[] = {
    /* Llama 3 70B on 64 GPUs: tp 8, pp 4, interleaved with two virtual stages, selective recompute, ZeRO-1. */
    {M_LLAMA70,
     "{'parallel':{'dp':2,'tp':8,'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':64},"
     "'global_batch_size':128,'seq_length':8192,'sequence_parallel':true,'recompute':{'granularity':'selective'},"
     "'optimizer':{'zero_stage':1},'overlap':{'tp_comm':true}}",
     {"--num-layers 80", "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64",
      "--group-query-attention", "--num-query-groups 8", "--seq-length 8192", "--max-position-embeddings 8192",
      "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope",
      "--rotary-base 500000", "--disable-bias-linear", "--attention-dropout 0", "--hidden-dropout 0",
      "--untie-embeddings-and-output-weights", "--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 4",
      "--num-layers-per-virtual-pipeline-stage 10", "--context-parallel-size 1", "--sequence-parallel",
      "--micro-batch-size 1", "--global-batch-size 128", "--recompute-granularity selective",
      "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap", "--bf16"},
     {"--recompute-method", "--recompute-num-layers", "--kv-channels", "--cross-entropy-loss-fusion", "--num-experts",
      "--expert-model-parallel-size", "--fp16", "--fp8-format", "--pipeline-model-parallel-layout", "--use-rope-scaling",
      "--qk-layernorm", "--use-megatron-fsdp", "--multi-latent-attention", "--use-tp-pp-dp-mapping", "--window-size"}},
    /* A fused loss: Megatron rejects the TE implementation, so the native one. */
    {M_LLAMA70, "{'parallel':{'dp':8,'tp':8},'sequence_parallel':true,'fused_loss':true}",
     {"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl native"},
     {"--recompute-granularity"}},
    /* DeepSeek-V3: expert parallel 8 with etp 1, three dense layers first, MLA with YaRN, the router of the
     * paper (sigmoid, expert bias, 8 groups of which 4, scaling 2.5), MTP, an uneven split as a layout. */
    {M_DSV3,
     "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'pipeline':{'stage_layers':[6,8,8,8,8,8,8,7],'n_micro_batches':32},"
     "'seq_length':4096}",
     {"--num-layers 61", "--hidden-size 7168", "--ffn-hidden-size 18432", "--num-attention-heads 128",
      "--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128",
      "--qk-pos-emb-head-dim 64", "--v-head-dim 128", "--rotary-base 10000", "--rotary-scaling-factor 40",
      "--mscale 1", "--mscale-all-dim 1", "--num-experts 256", "--moe-router-topk 8", "--moe-ffn-hidden-size 2048",
      "--moe-shared-expert-intermediate-size 2048", "--moe-layer-freq ([0]*3+[1]*58)", "--moe-grouped-gemm",
      "--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias", "--moe-router-topk-scaling-factor 2.5",
      "--moe-router-num-groups 8", "--moe-router-group-topk 4", "--moe-router-load-balancing-type seq_aux_loss",
      "--moe-aux-loss-coeff 0.0001", "--mtp-num-layers 1", "--expert-model-parallel-size 8",
      "--expert-tensor-parallel-size 1", "--pipeline-model-parallel-size 8",
      "--pipeline-model-parallel-layout Et*6|t*8|t*8|t*8|t*8|t*8|t*8|t*7mL", "--disable-bias-linear"},
     {"--group-query-attention", "--num-query-groups", "--kv-channels", "--num-layers-per-virtual-pipeline-stage",
      "--decoder-first-pipeline-num-layers", "--sequence-parallel", "--recompute-granularity", "--moe-router-pre-softmax",
      "--rope-type"}},
    /* GPT-3 175B: biases, tanh GELU, learned positions; full recompute of the first 4 layers of each stage. */
    {M_GPT3,
     "{'parallel':{'tp':8,'pp':8},'pipeline':{'n_micro_batches':64},'sequence_parallel':true,"
     "'recompute':{'granularity':'full','num_layers':4}}",
     {"--num-layers 96", "--hidden-size 12288", "--ffn-hidden-size 49152", "--num-attention-heads 96",
      "--seq-length 2048", "--max-position-embeddings 2048", "--normalization LayerNorm", "--openai-gelu",
      "--position-embedding-type learned_absolute", "--recompute-granularity full", "--recompute-method block",
      "--recompute-num-layers 4", "--global-batch-size 64", "--pipeline-model-parallel-size 8"},
     {"--swiglu", "--untie-embeddings-and-output-weights", "--group-query-attention", "--kv-channels", "--num-experts",
      "--disable-bias-linear", "--rotary-base", "--pipeline-model-parallel-layout"}},
    /* Full recompute of every layer: uniform, one layer per checkpoint. */
    {M_GPT3, "{'parallel':{'tp':8,'pp':8},'sequence_parallel':true,'recompute':{'granularity':'full'}}",
     {"--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"},
     {"--pipeline-model-parallel-layout"}},
    /* Uneven splits, with and without virtual stages: one layout, chunks in layer order. */
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[19,21,21,19]}}",
     {"--pipeline-model-parallel-layout Et*19|t*21|t*21|t*19L"},
     {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
      "--decoder-first-pipeline-num-layers"}},
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':3}}", {"--pipeline-model-parallel-layout Et*27|t*27|t*26L"}, {NULL}},
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[0,40,40,0]}}",
     {"--pipeline-model-parallel-layout E|t*40|t*40|L"}, {NULL}},
    {M_LLAMA70,
     "{'parallel':{'tp':8,'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8,"
     "'stage_layers':[9,10,10,11,9,10,10,11]}}",
     {"--pipeline-model-parallel-layout Et*9|t*10|t*10|t*11|t*9|t*10|t*10|t*11L"},
     {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"}},
    /* The rank order tp-cp-ep-pp-dp is --use-tp-pp-dp-mapping (initialize.py). */
    {M_LLAMA70, "{'parallel':{'dp':2,'tp':8,'pp':4,'order':['tp','cp','ep','pp','dp']}}", {"--use-tp-pp-dp-mapping"}, {NULL}},
    /* Precision. */
    {M_LLAMA70, "{'parallel':{'tp':8},'precision':'fp8'}", {"--bf16", "--fp8-format hybrid"}, {"--fp16"}},
    {M_LLAMA70, "{'parallel':{'tp':8},'precision':'fp16'}", {"--fp16"}, {"--bf16", "--fp8-format"}},
    /* Optimizer sharding. */
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':0}}", {"--overlap-grad-reduce"},
     {"--use-distributed-optimizer", "--overlap-param-gather", "--use-megatron-fsdp", "--ckpt-format"}},
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':2}}",
     {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads", "--ckpt-format fsdp_dtensor",
      "--overlap-param-gather"},
     {"--use-distributed-optimizer"}},
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':3},'overlap':{'grad_reduce':false}}",
     {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params"},
     {"--use-distributed-optimizer", "--overlap-param-gather", "--overlap-grad-reduce"}},
    /* Mixtral: every layer MoE, so no --moe-layer-freq; softmax over the top 2 with the config's aux loss. */
    {M_MIXTRAL, "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}",
     {"--num-experts 8", "--moe-router-topk 2", "--ffn-hidden-size 14336", "--moe-ffn-hidden-size 14336",
      "--moe-router-score-function softmax", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 0.02",
      "--rotary-base 1000000", "--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1",
      "--sequence-parallel", "--disable-bias-linear"},
     {"--moe-layer-freq", "--moe-shared-expert-intermediate-size", "--multi-latent-attention", "--moe-router-pre-softmax",
      "--moe-router-enable-expert-bias", "--window-size"}},
    /* Qwen3-30B-A3B: per-head q/k norms, head_dim 128 (not hidden / heads), top-8 renormalised. */
    {M_QWEN3MOE, "{'parallel':{'dp':4,'tp':2,'ep':8,'etp':1},'sequence_parallel':true}",
     {"--qk-layernorm", "--kv-channels 128", "--num-query-groups 4", "--rotary-base 1000000", "--norm-epsilon 1e-06",
      "--num-experts 128", "--moe-router-topk 8", "--moe-ffn-hidden-size 768", "--moe-router-score-function softmax",
      "--disable-bias-linear"},
     {"--moe-router-pre-softmax", "--moe-layer-freq", "--add-qkv-bias"}},
    /* Qwen2.5: biases on q, k, v only. Mistral: a 4096-token window on every layer. Llama 3.1: rope scaling. */
    {M_QWEN25, "{'parallel':{'tp':4,'dp':2},'sequence_parallel':true}", {"--disable-bias-linear", "--add-qkv-bias"},
     {"--window-size"}},
    {M_MISTRAL, "{'parallel':{'tp':4,'dp':2},'sequence_parallel':true}", {"--window-size 4096,0", "--disable-bias-linear"},
     {"--window-attn-skip-freq"}},
    {M_LLAMA31_8, "{'parallel':{'tp':2,'dp':4}}",
     {"--use-rope-scaling", "--rope-scaling-factor 8", "--rotary-base 500000", "--max-position-embeddings 131072"}, {NULL}},
    /* GPT-2: learned positions, tied embeddings, biases, context parallel. */
    {M_GPT2, "{'parallel':{'cp':2,'tp':2},'sequence_parallel':true}",
     {"--max-position-embeddings 1024", "--seq-length 1024", "--position-embedding-type learned_absolute",
      "--context-parallel-size 2", "--normalization LayerNorm", "--openai-gelu"},
     {"--untie-embeddings-and-output-weights", "--swiglu", "--disable-bias-linear"}},
};

static void check_list(const mflags *m, const char *const *list, bool want, const char *text) {
  for (int i = 0; i < MAX_LIST && list[i]; i++) {
    char flag[64];
    snprintf(flag, sizeof flag, "%s", list[i]);
    char *sp = strchr(flag, ' ');
    const char *value = sp ? sp + 1 : NULL;
    if (sp) *sp = '\0';
    const char *got = mg_get(m, flag);
    bool has = got && (!value || strcmp(got, list[i] + (value - flag)) == 0);
    if (has != want) fail_msg("%s %s:\n%s", list[i], want ? "is missing" : "must not be there", text);
  }
}

static void test_megatron_cases(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(megatron_cases); i++) {
    ap_status st;
    char *text = export_text(ctx, megatron_cases[i].model, megatron_cases[i].plan, "megatron", &st);
    if (st) fail_msg("case %zu (%s): %s", i, megatron_cases[i].plan, ap_ctx_error(ctx));
    mflags m;
    parse_megatron(text, &m);
    check_list(&m, megatron_cases[i].present, true, text);
    check_list(&m, megatron_cases[i].absent, false, text);
    assert_non_null(strstr(text, "# autopar plan: "));
    free(text);
  }
  ap_ctx_free(ctx);
}

/* The DeepSpeed keys and the torchtitan keys of one plan. */
static void test_deepspeed_torchtitan_keys(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_status st;
  const char *llama = "{'parallel':{'dp':2,'tp':8,'pp':4},'pipeline':{'n_micro_batches':64},'seq_length':8192,"
                      "'sequence_parallel':true,'recompute':{'granularity':'full'},'optimizer':{'zero_stage':1}}";
  char *ds = export_text(ctx, M_LLAMA70, llama, "deepspeed", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  static const char *const ds_keys[] = {"\"train_batch_size\": 128", "\"train_micro_batch_size_per_gpu\": 1",
                                        "\"gradient_accumulation_steps\": 64", "\"bf16\": {", "\"zero_optimization\": {",
                                        "\"stage\": 1", "\"overlap_comm\": true", "\"contiguous_gradients\": true",
                                        "\"reduce_scatter\": true", "\"activation_checkpointing\": {",
                                        "\"pipeline\": {", "\"activation_checkpoint_interval\": 1",
                                        "\"tensor_parallel\": 8", "\"pipeline_parallel\": 4", "\"data_parallel\": 2"};
  for (size_t i = 0; i < AP_COUNT(ds_keys); i++)
    if (!strstr(ds, ds_keys[i])) fail_msg("DeepSpeed config lacks %s:\n%s", ds_keys[i], ds);
  free(ds);

  char *tt = export_text(ctx, M_LLAMA70, llama, "torchtitan-toml", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  static const char *const tt_lines[] = {"name = \"llama3\"", "flavor = \"70B\"", "local_batch_size = 64",
                                         "global_batch_size = 128", "seq_len = 8192",
                                         "mixed_precision_param = \"bfloat16\"", "data_parallel_replicate_degree = 1",
                                         "data_parallel_shard_degree = 2", "fsdp_reshard_after_forward = \"never\"",
                                         "tensor_parallel_degree = 8", "enable_async_tensor_parallel = false",
                                         "pipeline_parallel_degree = 4", "pipeline_parallel_schedule = \"1F1B\"",
                                         "pipeline_parallel_microbatch_size = 1", "context_parallel_degree = 1",
                                         "expert_parallel_degree = 1", "expert_tensor_parallel_degree = 1",
                                         "mode = \"full\""};
  for (size_t i = 0; i < AP_COUNT(tt_lines); i++)
    if (!toml_has(tt, tt_lines[i])) fail_msg("torchtitan TOML lacks %s:\n%s", tt_lines[i], tt);
  free(tt);
  /* The current form: token counts, FSDP2, FullAC, the 70B baseline. */
  tt = export_text(ctx, M_LLAMA70, llama, "torchtitan", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  static const char *const py_lines[] = {
      "    config = llama3_70b()", "    config.model_spec = model_registry(\"70B\")",
      "    config.training.num_tokens_per_microbatch_per_dp_rank = 8192",
      "    config.training.num_tokens_per_train_step = 1048576", "    config.parallelism.num_pp_microbatches = 64",
      "    config.parallelism.data_parallel_shard_degree = 2", "    config.parallelism.tensor_parallel_degree = 8",
      "    config.parallelism.pipeline_parallel_schedule = \"1F1B\"", "    config.activation_checkpoint = FullAC.Config()",
      "    config.training.disable_cuda_graphs = True", "    config.loss = config.loss.loss_fn"};
  for (size_t i = 0; i < AP_COUNT(py_lines); i++)
    if (!toml_has(tt, py_lines[i])) fail_msg("torchtitan config lacks %s:\n%s", py_lines[i], tt);
  free(tt);

  /* The schedules by their torch.distributed.pipelining names, ZeRO-3 as FSDP2 resharding after forward,
   * plain data parallelism as DDP, selective recompute per op, async TP with compile, the expert degrees,
   * float8 under each version's name. */
  static const struct {
    int model;
    const char *format, *plan, *line;
  } tt_cases[] = {
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"Interleaved1F1B\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"ZBVZeroBubble\""},
      {M_LLAMA70, "torchtitan", "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':8}}",
       "    config.parallelism.pipeline_parallel_schedule = \"ZBVZeroBubble\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"GPipe\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'pp':4},'pipeline':{'schedule':'zb-h1','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"InterleavedZeroBubble\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'dp':8},'optimizer':{'zero_stage':3}}", "fsdp_reshard_after_forward = \"always\""},
      {M_LLAMA70, "torchtitan", "{'parallel':{'dp':8},'optimizer':{'zero_stage':3}}",
       "    config.parallelism.fsdp_reshard_after_forward = \"always\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'dp':8},'optimizer':{'zero_stage':0}}", "data_parallel_replicate_degree = 8"},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'dp':8},'recompute':{'granularity':'op'}}", "selective_ac_option = \"op\""},
      {M_LLAMA70, "torchtitan", "{'parallel':{'dp':8},'recompute':{'granularity':'op'}}",
       "    config.activation_checkpoint = SelectiveAC.Config()"},
      {M_LLAMA70, "torchtitan", "{'parallel':{'dp':8}}", "    config.activation_checkpoint = None"},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'dp':8},'recompute':{'granularity':'selective'}}", "mode = \"none\""},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'tp':8},'sequence_parallel':true,'overlap':{'tp_comm':true}}", "[compile]"},
      {M_LLAMA70, "torchtitan", "{'parallel':{'tp':8},'sequence_parallel':true,'overlap':{'tp_comm':true}}",
       "    config.compile.enable_async_tensor_parallel = True"},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'tp':4,'cp':2},'seq_length':8192,'sequence_parallel':true}",
       "context_parallel_degree = 2"},
      {M_QWEN3MOE, "torchtitan-toml", "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}",
       "expert_parallel_degree = 8"},
      {M_QWEN3MOE, "torchtitan-toml", "{'parallel':{'dp':4,'tp':2,'ep':4},'sequence_parallel':true}",
       "expert_tensor_parallel_degree = 2"},
      {M_QWEN3MOE, "torchtitan", "{'parallel':{'dp':4,'tp':2,'ep':8,'etp':1},'sequence_parallel':true}",
       "    config.parallelism.expert_parallel_degree = 8"},
      {M_LLAMA70, "torchtitan-toml", "{'parallel':{'tp':2},'precision':'fp8'}", "converters = [\"quantize.linear.float8\"]"},
      {M_LLAMA70, "torchtitan", "{'parallel':{'tp':2},'precision':'fp8'}",
       "    config.model_spec = model_registry(\"70B\", converters=[Float8LinearConverter.Config()])"},
      /* DeepSeek-V3's base config compiles only the loss: async TP compiles the model too (CompileConfig raises
       * otherwise); expert parallelism over the registry's all-to-all dispatcher turns CUDA graphs off. */
      {M_DSV3, "torchtitan", "{'parallel':{'dp':8,'tp':8,'ep':8,'etp':1},'sequence_parallel':true,'overlap':{'tp_comm':true},"
       "'seq_length':4096}", "    config.compile.components = [\"model\", \"loss\"]"},
      {M_DSV3, "torchtitan", "{'parallel':{'dp':8,'ep':8,'etp':1},'seq_length':4096}",
       "    config.training.disable_cuda_graphs = True"},
      {M_LLAMA70, "torchtitan", "{'parallel':{'dp':8},'fused_loss':true}", "# loss: the base config's ChunkedLossWrapper (8 "
       "slices of the tokens, lm_head and loss per slice), the plan's fused loss"},
  };
  for (size_t i = 0; i < AP_COUNT(tt_cases); i++) {
    tt = export_text(ctx, tt_cases[i].model, tt_cases[i].plan, tt_cases[i].format, &st);
    if (st) fail_msg("%s: %s", tt_cases[i].plan, ap_ctx_error(ctx));
    if (!toml_has(tt, tt_cases[i].line)) fail_msg("%s: %s lacks %s:\n%s", tt_cases[i].plan, tt_cases[i].format, tt_cases[i].line, tt);
    free(tt);
  }
  ap_ctx_free(ctx);
}

/* What a format cannot run is refused with a one-line reason; bad formats and bad plans are input errors. */
static const struct {
  int model;
  const char *plan, *format;
  ap_status status;
  const char *error;
} refused[] = {
    {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':8}}", "megatron",
     AP_UNSUPPORTED, "Megatron-LM has no zb-v schedule"},
    {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'zb-h1'}}", "megatron", AP_UNSUPPORTED,
     "Megatron-LM has no zb-h1 schedule"},
    {M_LLAMA70, "{'parallel':{'dp':8},'recompute':{'granularity':'op'}}", "megatron", AP_UNSUPPORTED,
     "Megatron-LM has no per-op selective checkpointing"},
    {M_LLAMA70, "{'parallel':{'dp':2,'cp':2,'order':['tp','dp','cp','ep','pp']},'seq_length':8192}", "megatron",
     AP_UNSUPPORTED, "the plan's order dp-cp is neither"},
    {M_MLP3, "{'parallel':{'dp':2}}", "megatron", AP_UNSUPPORTED, "is not a transformer Megatron-LM builds"},
    {M_GPT2, "{'seq_length':2048}", "megatron", AP_INVALID, "exceeds the model's 1024 learned positions"},
    {M_LLAMA70, "{'parallel':{'cp':2},'seq_length':8192}", "deepspeed", AP_UNSUPPORTED, "no context parallelism"},
    {M_MIXTRAL, "{'parallel':{'dp':8,'ep':8}}", "deepspeed", AP_UNSUPPORTED, "DeepSpeed-MoE sets the expert-parallel size"},
    {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8}}",
     "deepspeed", AP_UNSUPPORTED, "runs 1F1B with one stage per rank, not interleaved-1f1b"},
    {M_LLAMA70, "{'parallel':{'dp':2,'pp':4},'optimizer':{'zero_stage':2}}", "deepspeed", AP_UNSUPPORTED,
     "ZeRO-2 and ZeRO-3 are incompatible with DeepSpeed pipeline parallelism"},
    {M_LLAMA70, "{'precision':'fp16'}", "torchtitan", AP_UNSUPPORTED, "not fp16"},
    {M_LLAMA70, "{'parallel':{'dp':8},'fused_loss':true}", "torchtitan-toml", AP_UNSUPPORTED,
     "torchtitan v0.2.2's loss is the unchunked cross entropy"},
    /* DeepSpeed recomputes every layer it checkpoints (plan/stack.c [DS-rc]). */
    {M_LLAMA70, "{'parallel':{'dp':2,'pp':4},'recompute':{'granularity':'full','num_layers':3}}", "deepspeed",
     AP_UNSUPPORTED, "cannot recompute only the first 3 layers of each stage"},
    {M_LLAMA70, "{'parallel':{'dp':2,'pp':4},'recompute':{'granularity':'full','num_layers':20}}", "deepspeed", AP_OK, ""},
    /* trainer.py: a micro-batch's tokens divide by tp x 2·cp; the chunked loss's slices divide them. */
    {M_LLAMA70, "{'parallel':{'tp':2,'cp':2},'seq_length':12,'sequence_parallel':true}", "torchtitan", AP_UNSUPPORTED,
     "a micro-batch's 12 tokens must divide by 8"},
    {M_LLAMA70, "{'parallel':{'dp':8},'seq_length':4100,'fused_loss':true}", "torchtitan", AP_UNSUPPORTED,
     "splits a rank's 4100 tokens into 8 equal slices"},
    {M_LLAMA70, "{'parallel':{'pp':2},'recompute':{'granularity':'full','num_layers':2}}", "torchtitan", AP_UNSUPPORTED,
     "cannot recompute only the first 2 layers of each chunk"},
    {M_LLAMA70, "{'parallel':{'dp':8},'recompute':{'granularity':'selective'}}", "torchtitan", AP_UNSUPPORTED,
     "no core-attention recompute"},
    {M_QWEN3MOE, "{'parallel':{'dp':4,'tp':4,'ep':4,'etp':2},'sequence_parallel':true}", "torchtitan-toml",
     AP_UNSUPPORTED, "expert_tensor_parallel_degree 1 or tp (= 4) only, got etp = 2"},
    {M_QWEN3MOE, "{'parallel':{'dp':4,'tp':2,'ep':4},'sequence_parallel':true}", "torchtitan", AP_UNSUPPORTED,
     "so etp must be 1, got 2"},
    {M_LLAMA70, "{'parallel':{'dp':2,'cp':2,'order':['tp','dp','cp','ep','pp']},'seq_length':8192}", "torchtitan",
     AP_UNSUPPORTED, "which the plan's order dp-cp is not"},
    /* torchtitan trains its own models only (torchtitan/models/ @ b5bcd76c and v0.2.2). */
    {M_GPT3, "{'parallel':{'tp':8}}", "torchtitan", AP_UNSUPPORTED, "torchtitan has no gpt3-175b model"},
    {M_GPT2, "{}", "torchtitan-toml", AP_UNSUPPORTED, "torchtitan has no gpt2 model"},
    {M_MIXTRAL, "{'parallel':{'dp':8}}", "torchtitan", AP_UNSUPPORTED, "torchtitan has no mixtral-8x7b model"},
    {M_MISTRAL, "{'parallel':{'dp':8}}", "torchtitan-toml", AP_UNSUPPORTED, "torchtitan has no mistral-7b model"},
    {M_LLAMA8, "{'parallel':{'dp':8}}", "torchtitan", AP_OK, ""},
    {M_MLP3, "{'parallel':{'dp':2}}", "torchtitan", AP_UNSUPPORTED, "model mlp-3 has no attention layers"},
    {M_LLAMA70, "{}", "bogus", AP_INVALID,
     "unknown export format \"bogus\" (expected one of: megatron, deepspeed, torchtitan, torchtitan-toml, json)"},
    {M_LLAMA70, "{}", "megatrom", AP_INVALID, "did you mean megatron?"},
    {M_LLAMA70, "{'parallel':{'tp':16}}", "json", AP_INVALID, "plan: tp = 16 must divide num_query_groups (KV heads) = 8"},
};

static void test_refused(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(refused); i++) {
    ap_status st;
    char *text = export_text(ctx, refused[i].model, refused[i].plan, refused[i].format, &st);
    if (!st && refused[i].status == AP_OK) { /* a control: the same kind of plan that exports */
      free(text);
      continue;
    }
    if (!st) fail_msg("case %zu (%s as %s): exported, want \"%s\":\n%s", i, refused[i].plan, refused[i].format,
                      refused[i].error, text);
    print_message("# %s\n", ap_ctx_error(ctx));
    assert_int_equal(st, refused[i].status);
    assert_error_contains(ctx, refused[i].error);
  }
  ap_ctx_free(ctx);
}

/* The JSON export reads back as the same plan, and a plan that names its model needs no model argument. */
static void test_json_round_trip(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  static const char *const plans[] = {
      "{'model':'llama-3-70b','cluster':'h100:64','parallel':{'dp':2,'tp':8,'pp':4,'vpp':2},"
      "'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':64},'seq_length':8192,'sequence_parallel':true,"
      "'recompute':{'granularity':'selective'}}",
      "{'model':'llama-3-70b','parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[19,21,21,19]},"
      "'recompute':{'granularity':'full','num_layers':3},'precision':'fp8','optimizer':{'zero_stage':3}}",
  };
  for (size_t i = 0; i < AP_COUNT(plans); i++) {
    ap_status st;
    char *text = export_text(ctx, M_LLAMA70, plans[i], "json", &st); /* check_json reloads it */
    if (st) fail_msg("%s", ap_ctx_error(ctx));
    assert_non_null(strstr(text, "\"format\":\"autopar-plan/1\""));
    free(text);
    ap_plan *ap = plan_of(plans[i]);
    char *out = NULL;
    if (ap_export(ctx, NULL, ap, "megatron", &out)) fail_msg("%s", ap_ctx_error(ctx));
    assert_non_null(strstr(out, "--num-layers 80"));
    ap_free(out);
    ap_plan_free(ap);
  }
  ap_plan *ap = plan_of("{'parallel':{'tp':8}}");
  char *out = NULL;
  assert_int_equal(ap_export(ctx, NULL, ap, "megatron", &out), AP_INVALID);
  assert_error_contains(ctx, "no model given");
  assert_null(out);
  ap_plan_free(ap);
  ap_ctx_free(ctx);
}

/* The header comments: what Megatron needs from the environment and what the export could not state. */
static void test_header_notes(void **state) {
  (void)state;
  static const struct {
    int model;
    const char *plan, *format, *line;
  } cases[] = {
      {M_LLAMA70, "{'parallel':{'tp':8}}", "megatron", "# env: export CUDA_DEVICE_MAX_CONNECTIONS=1"},
      {M_LLAMA70, "{'parallel':{'tp':8},'optimizer':{'zero_stage':3}}", "megatron",
       "# env: leave CUDA_DEVICE_MAX_CONNECTIONS unset or > 1"},
      {M_LLAMA70, "{'parallel':{'dp':2,'tp':8,'pp':4}}", "megatron",
       "# 64 ranks: Megatron derives dp = world / (tp x pp x cp) = 64 / (8 x 4 x 1) = 2"},
      {M_LLAMA70, "{'cluster':'dgx-h100:8x8','parallel':{'dp':2,'tp':8,'pp':4}}", "megatron",
       "torchrun --nnodes 8 --nproc-per-node 8 "},
      {M_LLAMA70, "{'cluster':'dgx-h100:4x8','parallel':{'dp':4,'tp':8}}", "megatron", "# Megatron-LM @ d98e8a64"},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe'}}", "megatron", "no GPipe schedule"},
      {M_LLAMA70, "{'parallel':{'dp':2},'overlap':{'grad_reduce':false}}", "megatron", "--overlap-param-gather left out"},
      {M_DSV3, "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'pipeline':{'stage_layers':[6,8,8,8,8,8,8,7]},'seq_length':4096}",
       "megatron", "--mtp-num-layers 1 trains the model's multi-token-prediction module"},
      {M_LLAMA70, "{'parallel':{'dp':2,'tp':2},'optimizer':{'zero_stage':0}}", "torchtitan-toml", "its DDP is one-dimensional"},
      {M_LLAMA70, "{'parallel':{'dp':2}}", "torchtitan-toml", "# torchtitan v0.2.x job config"},
      {M_LLAMA70, "{'parallel':{'dp':2}}", "torchtitan", "# torchtitan @ b5bcd76c (August 2026) config module"},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe'}}", "deepspeed", "DeepSpeed has no GPipe schedule"},
      {M_LLAMA70, "{'parallel':{'dp':2,'tp':4}}", "deepspeed", "deepspeed.initialize(..., mpu=mpu)"},
      {M_LLAMA70, "{'parallel':{'dp':8}}", "deepspeed", "holds with or without an mpu"},
  };
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    ap_status st;
    char *text = export_text(ctx, cases[i].model, cases[i].plan, cases[i].format, &st);
    if (st) fail_msg("%s: %s", cases[i].plan, ap_ctx_error(ctx));
    if (!strstr(text, cases[i].line)) fail_msg("%s as %s lacks \"%s\":\n%s", cases[i].plan, cases[i].format, cases[i].line, text);
    free(text);
  }
  ap_ctx_free(ctx);
}

/* A MoE model with biases on every linear layer: Megatron keeps add_bias_linear and then asserts "Bias in Moe is
 * only supported when ETP==1" (transformer_config.py), so etp > 1 is refused and etp = 1 exports. */
static void test_moe_bias(void **state) {
  (void)state;
  tf_config *c = calloc(1, sizeof *c);
  assert_non_null(c);
  tf_config_defaults(c);
  c->name = "moe-bias";
  c->n_layers = 4;
  c->hidden = 1024;
  c->heads = c->kv_heads = 8;
  c->head_dim = c->head_dim_v = 128;
  c->ffn = c->moe_ffn = 2048;
  c->vocab = 32000;
  c->max_pos = 4096;
  c->rope = true;
  c->n_experts = 4;
  c->top_k = 2;
  c->qkv_bias = c->o_bias = c->mlp_bias = c->expert_bias = c->router_bias = true;
  for (int64_t i = 0; i < c->n_layers; i++) c->is_moe_layer[i] = true;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  if (model_from_tf_config(ctx, c, &m)) fail_msg("%s", ap_ctx_error(ctx));
  free(c);
  ap_plan *ap = plan_of("{'parallel':{'dp':2,'tp':2,'ep':2},'sequence_parallel':true}");
  char *out = NULL;
  assert_int_equal(ap_export(ctx, m, ap, "megatron", &out), AP_UNSUPPORTED);
  assert_error_contains(ctx, "biases in MoE only with expert tensor parallelism 1");
  ap_plan_free(ap);
  ap = plan_of("{'parallel':{'dp':2,'tp':2,'ep':2,'etp':1},'sequence_parallel':true}");
  if (ap_export(ctx, m, ap, "megatron", &out)) fail_msg("%s", ap_ctx_error(ctx));
  check_megatron(&ap->p, model_graph(m), out);
  assert_null(strstr(out, "--disable-bias-linear"));
  assert_non_null(strstr(out, "--expert-tensor-parallel-size 1"));
  ap_free(out);
  ap_plan_free(ap);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* The table tells defined names from undefined ones and types from each other, so the checks above can fail:
 * facts read in the sources at the table's commits. */
static void test_table(void **state) {
  (void)state;
  const fa_row *r = fa_find("megatron", "--cross-entropy-fusion-impl");
  assert_non_null(r);
  assert_true(in_choices(r->choices, "te") && in_choices(r->choices, "native") && !in_choices(r->choices, "fused"));
  assert_non_null(fa_find("megatron", "--use-tp-pp-dp-mapping"));
  assert_non_null(fa_find("megatron", "--pipeline-model-parallel-layout"));
  assert_non_null(fa_find("megatron", "--disable-bias-linear")); /* add_bias_linear defaults to True */
  assert_null(fa_find("megatron", "--add-bias-linear"));
  assert_null(fa_find("megatron", "--data-parallel-size"));
  r = fa_find("megatron", "--rotary-base");
  assert_non_null(r);
  assert_true(value_fits(r, "500000") && !value_fits(r, "500000.0"));
  r = fa_find("megatron", "--window-size");
  assert_true(r && value_fits(r, "4096,0") && !value_fits(r, "4096,x"));
  r = fa_find("deepspeed", "zero_optimization.stage");
  assert_true(r && strcmp(r->type, "int") == 0 && in_choices(r->choices, "3") && !in_choices(r->choices, "4"));
  assert_non_null(fa_find("deepspeed", "zero_optimization.stage3_prefetch_bucket_size"));
  assert_non_null(fa_find("deepspeed", "train_micro_batch_size_per_gpu"));
  assert_null(fa_find("deepspeed", "zero_optimization.tensor_parallel"));
  assert_null(fa_find("torchtitan", "parallelism.expert_tensor_parallel_degree")); /* gone since v0.2.2 */
  assert_non_null(fa_find("torchtitan-toml", "parallelism.expert_tensor_parallel_degree"));
  assert_null(fa_find("torchtitan", "training.local_batch_size"));
  assert_non_null(fa_find("torchtitan", "training.num_tokens_per_train_step"));
  assert_non_null(fa_find("torchtitan-toml", "converter:quantize.linear.float8"));
  assert_null(fa_find("torchtitan-toml", "converter:float8"));
  assert_null(fa_find("torchtitan", "model:mixtral:8x7B"));
  /* The chunked loss the torchtitan stack models (plan/stack.c [TT-chunk]) has the slices of the source. */
  r = fa_find("torchtitan", "default:ChunkedLossWrapper.Config.num_chunks");
  assert_non_null(r);
  assert_int_equal(strtol(r->choices, NULL, 10), PLAN_STACK_TT_LOSS_CHUNKS);
  assert_int_equal(plan_stack_get(PLAN_STACK_TORCHTITAN)->loss.fused_chunks, PLAN_STACK_TT_LOSS_CHUNKS);
  /* The head is lm_head at b5bcd76c, output at v0.2.2: each form's split must end with its own. */
  assert_string_equal(fa_find("torchtitan", "pp:last_stage")->choices, "norm,lm_head");
  assert_string_equal(fa_find("torchtitan-toml", "pp:last_stage")->choices, "norm,output");
  assert_non_null(fa_find("torchtitan", "check:cuda_graphs:pp"));
  assert_non_null(fa_find("deepspeed", "launcher:--hostfile"));
}

/* An export refused for what the plan chose names the command that plans for the format's stack from the plan's
 * recorded inputs; one refused for the model (a framework that cannot build it) does not, since no plan helps. A
 * plan costed for another stack exports with a note naming the same command. */
static void test_replan_command(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_status st;
  static const struct {
    int model;
    const char *plan, *format, *want;
  } cases[] = {
      {M_LLAMA70, "{'model':'llama-3-70b','cluster':'dgx-h100:1x8','global_batch_size':64,'seq_length':8192,"
                  "'parallel':{'dp':4,'cp':2},'stack':'megatron-lm'}",
       "deepspeed", "for a plan deepspeed runs: autopar plan --model llama-3-70b --cluster dgx-h100:1x8 --gbs 64 --seq 8192 "
                    "--stack deepspeed --export deepspeed"},
      {M_LLAMA70, "{'model':'llama-3-70b','seq_length':8192,'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v',"
                  "'n_micro_batches':8}}",
       "megatron", "--cluster CLUSTER_OF_4_DEVICES --gbs 8 --seq 8192 --stack megatron-lm --export megatron"},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    char *text = export_text(ctx, cases[i].model, cases[i].plan, cases[i].format, &st);
    assert_null(text);
    assert_int_equal(st, AP_UNSUPPORTED);
    assert_error_contains(ctx, cases[i].want);
  }
  assert_null(export_text(ctx, M_MIXTRAL, "{'parallel':{'dp':8}}", "torchtitan", &st));
  assert_error_contains(ctx, "torchtitan has no mixtral-8x7b model");
  assert_null(strstr(ap_ctx_error(ctx), "autopar plan"));
  /* Costed for megatron-lm, written for torchtitan: a note with the command. */
  char *text = export_text(ctx, M_LLAMA70,
                           "{'model':'llama-3-70b','cluster':'dgx-h100:1x8','global_batch_size':64,'seq_length':8192,"
                           "'parallel':{'dp':8},'stack':'megatron-lm','optimizer':{'zero_stage':3}}",
                           "torchtitan", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  assert_non_null(strstr(text, "# note: the plan was costed for megatron-lm, not torchtitan"));
  assert_non_null(strstr(text, "#   autopar plan --model llama-3-70b --cluster dgx-h100:1x8 --gbs 64 --seq 8192 --stack "
                               "torchtitan --export torchtitan\n"));
  free(text);
  text = export_text(ctx, M_LLAMA70, "{'parallel':{'dp':8},'stack':'torchtitan','optimizer':{'zero_stage':3}}", "torchtitan", &st);
  assert_null(strstr(text, "costed for"));
  free(text);
  ap_ctx_free(ctx);
}

/* The schedule an export states is the schedule data's (plan/schedule.c): over every schedule kind, 2 and 4
 * stages and several micro-batch counts, the stage lists built here give the chunks per stage, the
 * micro-batches and stage 0's most passes in flight (counted along its list, and equal to the in-flight rule
 * memory reads); each format that takes the plan must state those: Megatron's virtual-stage flag and global
 * batch, DeepSpeed's accumulation steps and the pipeline's in-flight count, torchtitan's micro-batches and
 * schedule, and the "# schedule:" line. */
static void test_schedule_facts(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int checked = 0;
  for (int kind = 0; kind < PLAN_SCHED_COUNT_; kind++) {
    for (int pp = 2; pp <= 4; pp += 2) {
      for (int mult = 1; mult <= 4; mult *= 2) {
        int vpp = kind == PLAN_SCHED_INTERLEAVED_1F1B || kind == PLAN_SCHED_ZB_V ? 2 : 1, m = pp * mult;
        char sq[512];
        snprintf(sq, sizeof sq,
                 "{'global_batch_size':%d,'parallel':{'pp':%d,'vpp':%d},'pipeline':{'schedule':'%s',"
                 "'n_micro_batches':%d}}",
                 m, pp, vpp, plan_schedule_name((plan_schedule)kind), m);
        ap_plan *ap = plan_of(sq);
        /* The test's own count along the lists. */
        plan_schedule_order o;
        if (plan_schedule_build(ctx, &ap->p, &o)) fail_msg("%s: %s", sq, ap_ctx_error(ctx));
        int64_t chunks = 0, max_mb = -1, live = 0, peak = 0;
        bool seen[PLAN_MAX_CHUNKS] = {false};
        for (size_t i = o.first[0]; i < o.first[1]; i++) {
          const sched_item *it = &o.items[i];
          if (!seen[it->chunk]) seen[it->chunk] = true, chunks++;
          if (it->micro_batch > max_mb) max_mb = it->micro_batch;
          if (it->pass == SCHED_F && ++live > peak) peak = live;
          if (it->pass == SCHED_B) live--;
        }
        plan_schedule_free(&o);
        int64_t rule = plan_schedule_in_flight_passes(&ap->p, 0);
        if (rule > (int64_t)vpp * m) rule = (int64_t)vpp * m;
        assert_int_equal(chunks, vpp);
        assert_int_equal(max_mb + 1, m);
        /* Known: with ZB-V and fewer than 2·pp micro-batches the list keeps fewer passes in flight than the rule
         * (pp = m = 4: 5 against 8), so memory's rule is an upper bound there; elsewhere they are equal. */
        if (kind == PLAN_SCHED_ZB_V && m < 2 * pp) assert_true(peak <= rule);
        else if (peak != rule)
          fail_msg("%s: stage 0's list keeps %lld passes in flight, the rule says %lld", sq, (long long)peak,
                   (long long)rule);
        export_sched sc;
        assert_int_equal(export_schedule_facts(ctx, &ap->p, &sc), AP_OK);
        assert_int_equal(sc.chunks_per_stage, chunks);
        assert_int_equal(sc.micro_batches, m);
        assert_int_equal(sc.in_flight_stage0, peak);
        char note[256];
        snprintf(note, sizeof note, "# schedule: %s over %d stages, %d chunk%s per stage, %d micro-batches",
                 plan_schedule_name((plan_schedule)kind), pp, vpp, vpp == 1 ? "" : "s", m);
        char in_flight[96];
        snprintf(in_flight, sizeof in_flight, "stage 0 keeps at most %lld chunk passes in flight", (long long)peak);
        ap_plan_free(ap);
        static const char *const formats[] = {"megatron", "deepspeed", "torchtitan", "torchtitan-toml"};
        for (size_t f = 0; f < AP_COUNT(formats); f++) {
          ap_status st;
          char *text = export_text(ctx, M_LLAMA8, sq, formats[f], &st);
          if (st == AP_UNSUPPORTED) continue;
          if (st) fail_msg("%s %s: %s", formats[f], sq, ap_ctx_error(ctx));
          char want[160];
          if (f == 0) {
            snprintf(want, sizeof want, "--global-batch-size %d", m);
            if (!strstr(text, want)) fail_msg("megatron %s lacks %s:\n%s", sq, want, text);
            if ((vpp > 1) != (strstr(text, "--num-layers-per-virtual-pipeline-stage") != NULL))
              fail_msg("megatron %s: the virtual-stage flag disagrees with %d chunks per stage", sq, vpp);
            if (kind != PLAN_SCHED_GPIPE && (!strstr(text, note) || !strstr(text, in_flight)))
              fail_msg("megatron %s lacks \"%s\" / \"%s\":\n%s", sq, note, in_flight, text);
          } else if (f == 1) {
            snprintf(want, sizeof want, "\"gradient_accumulation_steps\": %d", m);
            char want2[96];
            snprintf(want2, sizeof want2, "\"stage0_in_flight_micro_batches\": %lld", (long long)peak);
            /* GPipe runs as 1F1B there: its in-flight count is 1F1B's, not GPipe's. */
            if (!strstr(text, want) || (kind != PLAN_SCHED_GPIPE && !strstr(text, want2)))
              fail_msg("deepspeed %s lacks %s / %s:\n%s", sq, want, want2, text);
          } else {
            snprintf(want, sizeof want, f == 2 ? "num_pp_microbatches = %d" : "local_batch_size = %d", m);
            if (!strstr(text, want) || !strstr(text, note) || !strstr(text, in_flight))
              fail_msg("%s %s lacks %s / \"%s\":\n%s", formats[f], sq, want, note, text);
          }
          checked++;
          free(text);
        }
      }
    }
  }
  /* Every kind reached at least one format (torchtitan takes all five). */
  assert_true(checked >= PLAN_SCHED_COUNT_ * 6);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_cases), cmocka_unit_test(test_deepspeed_torchtitan_keys),
      cmocka_unit_test(test_refused),        cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_header_notes),   cmocka_unit_test(test_table), cmocka_unit_test(test_moe_bias),
      cmocka_unit_test(test_schedule_facts), cmocka_unit_test(test_replan_command),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
