/* autopar: the public API.
 *
 * autopar turns a model and a cluster into ranked hybrid-parallel training plans, each with a predicted
 * iteration time and peak memory per device. This header is the whole public surface of libautopar; the
 * CLI (src/cli/) is its first client and uses nothing else.
 *
 * Conventions:
 *  - Every fallible function returns an ap_status. AP_OK is 0. The human-readable detail of the last
 *    failure ("cfg.json:3:14: hidden_size must be > 0, got -5") is kept in the context and read with
 *    ap_ctx_error(); there is no global state.
 *  - Handles are opaque, created by *_new / *_load and released by the matching *_free; *_free(NULL) is a
 *    no-op. Strings returned through char ** are heap-allocated and freed by the caller with ap_free().
 *  - Units are in the names: _bytes, _s, _flop, _flop_per_s, _Bps.
 *  - The library never prints, aborts or exits on bad input; logging goes through ap_log_fn.
 *  - Every function checks its arguments: a NULL handle, string or output pointer where one is required is
 *    AP_INVALID with a message naming the function and the argument (functions returning a value return 0,
 *    "" or NULL instead; *_free(NULL) is a no-op).
 *  - Thread-safety, per handle type: distinct contexts may be used from distinct threads at once (the
 *    library has no mutable global state; tests/test_threads.c checks it under ThreadSanitizer). One
 *    ap_ctx must not be used by two threads at once. An ap_model or ap_cluster is read-only after loading
 *    and may be shared by threads (each with its own context) once loaded; ap_free/_free it once, when no
 *    call uses it. An ap_plan is modified by ap_plan_set, ap_estimate, ap_simulate and ap_export (derived
 *    fields are resolved in place): one thread at a time. ap_search_opts is only read.
 *  - Numbers are written and read with a decimal point whatever the host's locale: a function that takes a
 *    context runs under the "C" locale on the calling thread for its duration (uselocale) and restores the
 *    host's locale, global or per thread, before it returns; the host's log and progress callbacks, called
 *    during the call, see "C" too.
 */
#ifndef AUTOPAR_H
#define AUTOPAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AP_API __attribute__((visibility("default")))
#else
#define AP_API
#endif

#define AP_VERSION_STRING "0.1.0"

/* Status codes: one table, so the enum, the names and the messages never drift apart. The CLI maps
 * AP_INFEASIBLE to exit status 1, every input error to 2. */
#define AP_STATUS_MAP(X)                                                   \
  X(OK, 0, "ok")                                                           \
  X(NOMEM, 1, "out of memory")                                             \
  X(IO, 2, "cannot read or write a file")                                  \
  X(PARSE, 3, "malformed input")                                           \
  X(INVALID, 4, "invalid value")                                           \
  X(NOTFOUND, 5, "not found")                                              \
  X(UNSUPPORTED, 6, "unsupported")                                         \
  X(INFEASIBLE, 7, "no feasible plan")                                     \
  X(CANCELLED, 8, "cancelled")                                             \
  X(INTERNAL, 9, "internal error")

typedef enum {
#define AP_X_(name, value, msg) AP_##name = value,
  AP_STATUS_MAP(AP_X_)
#undef AP_X_
  AP_STATUS_COUNT_
} ap_status;

/* The library's version, AP_VERSION_STRING of the header it was built with (a static string). */
AP_API const char *ap_version(void);

/* Returns a static string naming the status, never NULL. */
AP_API const char *ap_status_str(ap_status status);

/* Frees memory the library handed to the caller (strings from *_json functions and the like). */
AP_API void ap_free(void *p);

/* ---- Context ---------------------------------------------------------------------------------- */

typedef struct ap_ctx ap_ctx;

typedef enum { AP_LOG_ERROR = 0, AP_LOG_WARN = 1, AP_LOG_INFO = 2, AP_LOG_DEBUG = 3 } ap_log_level;

/* A log sink. msg has no trailing newline. */
typedef void (*ap_log_fn)(void *user, ap_log_level level, const char *msg);

/* A progress sink for long runs: fraction in [0, 1]. Returning non-zero asks the run to stop; it then
 * returns AP_CANCELLED (a search returns what it has found so far where it can). */
typedef int (*ap_progress_fn)(void *user, double fraction, const char *what);

/* Creates a context. Returns NULL only when out of memory. The caller frees it with ap_ctx_free. */
AP_API ap_ctx *ap_ctx_new(void);

/* A host allocator, with realloc semantics as Lua's lua_Alloc: ptr NULL allocates n_bytes (never 0); n_bytes 0
 * frees ptr and returns NULL; otherwise resizes ptr to n_bytes. Returns NULL when it cannot allocate. */
typedef void *(*ap_alloc_fn)(void *user, void *ptr, size_t n_bytes);
/* Creates a context whose allocations (the context itself, every handle and string made through it) go
 * through fn. NULL when fn is NULL or fails. Each function taking the context installs fn for the calling
 * thread; ap_free and the *_free functions release memory through the allocator the calling thread
 * installed last, so a thread that mixes contexts with different allocators frees each handle after a
 * call on the context that made it (one allocator per thread or per process needs nothing). Memory that
 * jansson allocates follows jansson's own json_set_alloc_funcs. When an allocation fails, the call returns
 * AP_NOMEM, leaves no partial file and leaks nothing. */
AP_API ap_ctx *ap_ctx_new_with_allocator(ap_alloc_fn fn, void *user);
AP_API void ap_ctx_free(ap_ctx *ctx);

/* The detail of the most recent failure in this context ("" when none). Owned by the context; valid until
 * the next call that fails or ap_ctx_free. */
AP_API const char *ap_ctx_error(const ap_ctx *ctx);
/* The status of the most recent failure (AP_OK when none). */
AP_API ap_status ap_ctx_status(const ap_ctx *ctx);

AP_API void ap_ctx_set_log(ap_ctx *ctx, ap_log_fn fn, void *user, ap_log_level max_level);
AP_API void ap_ctx_set_progress(ap_ctx *ctx, ap_progress_fn fn, void *user);

/* Makes every later evaluation in this context use the calibration file at path (written by `autopar
 * calibrate`; docs/calibration.md) instead of the built-in one. The file is read and checked now: a bad file
 * fails here with AP_IO/AP_PARSE/AP_INVALID and the context keeps its previous calibration. NULL or "" goes
 * back to the built-in calibration. */
AP_API ap_status ap_ctx_set_calibration(ap_ctx *ctx, const char *path);

/* ---- Optional parts ------------------------------------------------------------------------------
 * The pieces of autopar that need a third-party library (ONNX import: protobuf-c; the intra-op ILP: CBC) are
 * built as separate static libraries, libautopar-<part>.a, kept out of libautopar's own link line
 * (docs/build.md). A host that links a part adds it to each context that should use it, as a Lua host opens
 * the libraries it wants; a context without a part answers AP_UNSUPPORTED naming the part where it would be
 * needed. The CLI adds every part it was built with. */
typedef struct ap_part ap_part;

/* Makes part available to every later call in ctx (and to contexts derived from it). Adding a part of a name
 * the context already has replaces it. AP_INVALID on a NULL argument, AP_NOMEM when the context holds its
 * maximum of parts. The part is borrowed: it must outlive the context (the parts' own tables are static). */
AP_API ap_status ap_ctx_add_part(ap_ctx *ctx, const ap_part *part);
/* The part's name ("onnx", "ilp"); "" for NULL. */
AP_API const char *ap_part_name(const ap_part *part);
/* The parts' entry points, each defined only in its own library: ONNX import (libautopar-onnx.a) and the
 * intra-op ILP solver (libautopar-ilp.a). Each returns a static table, never NULL. */
AP_API const ap_part *ap_part_onnx(void);
AP_API const ap_part *ap_part_ilp(void);

/* Writes text to path atomically: to a temporary file in the same folder, then renamed over path, so that a
 * failure never leaves a partial file. AP_IO names the path and the reason. */
AP_API ap_status ap_write_file(ap_ctx *ctx, const char *path, const char *text);
/* AP_OK when ap_write_file(path) could succeed now (the folder exists and takes a new file, the target is
 * writable), else AP_IO naming the path and the reason; writes nothing. For checks before long work. */
AP_API ap_status ap_check_writable(ap_ctx *ctx, const char *path);

/* ---- Models ----------------------------------------------------------------------------------- */

typedef struct ap_model ap_model;

/* Loads a model by preset name ("llama-3-70b"), by path to a Hugging Face config.json, or by path to an
 * autopar op-graph JSON file (docs/graph-format.md). The caller frees *out with ap_model_free. On an unknown
 * preset the error detail suggests the closest names. */
AP_API ap_status ap_model_load(ap_ctx *ctx, const char *name_or_path, ap_model **out);
AP_API void ap_model_free(ap_model *model);

/* Exact weight counts of the model (embeddings counted once when tied). For MoE, params_active counts
 * the top-k routed experts and the shared experts of each MoE layer. */
AP_API int64_t ap_model_params_total(const ap_model *model);
AP_API int64_t ap_model_params_active(const ap_model *model);
AP_API const char *ap_model_name(const ap_model *model);
/* What ap_model_load read the model from: the file's absolute path (the path as given where it does not
 * resolve), or the preset name; the model's name for a model built otherwise. A plan records it ("model") so
 * that `export --plan` finds the model again, from any directory. */
AP_API const char *ap_model_spec(const ap_model *model);

/* Describes the model at sequence length seq as JSON (keys documented in docs/model-inputs.md, among them
 * params_total, params_active, blocks[], flop_per_token). seq <= 0 uses the model's default. The caller
 * frees *json_out with ap_free. */
AP_API ap_status ap_model_describe_json(ap_ctx *ctx, const ap_model *model, int64_t seq, char **json_out);
/* The same description as plain text for a terminal. */
AP_API ap_status ap_model_describe_text(ap_ctx *ctx, const ap_model *model, int64_t seq, char **text_out);

/* Lists the built-in model presets as JSON: {"format":"autopar-models/1","models":[{"name":…,…}]} (docs/json.md). */
AP_API ap_status ap_models_list_json(ap_ctx *ctx, char **json_out);
AP_API ap_status ap_models_list_text(ap_ctx *ctx, char **text_out);

/* ---- Clusters --------------------------------------------------------------------------------- */

typedef struct ap_cluster ap_cluster;

/* Loads a cluster from a preset name ("dgx-h100"), a shorthand ("h100:64", "dgx-h100:8x8" = 8 nodes of
 * 8) or a path to a cluster JSON file (docs/formats.md). The caller frees *out with ap_cluster_free. */
AP_API ap_status ap_cluster_load(ap_ctx *ctx, const char *spec, ap_cluster **out);
AP_API void ap_cluster_free(ap_cluster *cluster);
AP_API int64_t ap_cluster_n_devices(const ap_cluster *cluster);
AP_API ap_status ap_cluster_describe_json(ap_ctx *ctx, const ap_cluster *cluster, char **json_out);
/* The same for people: rendered from that JSON document (what it is, its origin, what a shorthand without a
 * count was taken to mean, each node group's device, host side and links). The caller frees with ap_free. */
AP_API ap_status ap_cluster_describe_text(ap_ctx *ctx, const ap_cluster *cluster, char **text_out);
AP_API ap_status ap_clusters_list_json(ap_ctx *ctx, char **json_out);
AP_API ap_status ap_clusters_list_text(ap_ctx *ctx, char **text_out);


/* ---- Plans ------------------------------------------------------------------------------------ */

typedef struct ap_plan ap_plan;

/* A plan with defaults (docs/plan-format.md); fields not set are derived where they can be: dp from the
 * device count, the micro-batch count from the global batch. The caller frees *out with ap_plan_free. */
AP_API ap_status ap_plan_new(ap_ctx *ctx, ap_plan **out);
/* Reads an autopar JSON plan file. */
AP_API ap_status ap_plan_load(ap_ctx *ctx, const char *path, ap_plan **out);
/* The same from the plan's JSON text (a plan object as ap_plan_json, export "json" and the documents' "plan"
 * keys write it: autopar-plan/1, or an op-level autopar-plan/2 document); messages name it "plan". */
AP_API ap_status ap_plan_parse(ap_ctx *ctx, const char *json_text, ap_plan **out);
/* Sets one field by name, as the CLI's flags do. key is a field's canonical name (micro_batch_size, as in the
 * JSON form), its CLI flag (tp, pp, dp, cp, ep, etp, vpp, mbs, gbs, seq, micro-batches, schedule, recompute,
 * recompute-layers, zero, precision, sp, order, stage-layers "20,20,20,20", fused-loss, tp-comm-overlap,
 * overlap-grad-reduce, overlap-param-gather) or a Megatron-LM argument name (tensor-model-parallel-size …);
 * '-' and '_' are interchangeable. docs/plan-format.md lists them. AP_INVALID names the key and the value. */
AP_API ap_status ap_plan_set(ap_ctx *ctx, ap_plan *ap, const char *key, const char *value);
/* The plan fields ap_plan_set takes, from the field table (src/plan/plan_fields.c), i from 0: the i-th one's
 * canonical key ("micro_batch_size": a Python identifier; with dashes for underscores, the CLI's flag
 * --micro-batch-size), with a one-phrase help in *help (may be NULL); NULL past the last. Static storage. */
AP_API const char *ap_plan_key(size_t i, const char **help);
/* The other spellings the i-th key is accepted under, '|'-separated, the habitual CLI flag first
 * ("mbs"; "tensor_model_parallel_size" for tp); "" for none, NULL past the last. Static storage. */
AP_API const char *ap_plan_key_aliases(size_t i);
/* For an integer (or 0/1) key: its range in *min and *max, and 1; 0 for the others (names, lists, enums). */
AP_API int ap_plan_key_range(size_t i, int64_t *min, int64_t *max);
/* 1 when the i-th key reads k, M and G as 2^10, 2^20 and 2^30 (seq_length: "8k" = 8192, a context length as
 * practitioners count it), 0 when as 10^3, 10^6 and 10^9 (every other integer key) or past the last. */
AP_API int ap_plan_key_binary_suffix(size_t i);
/* The plan as autopar JSON (docs/plan-format.md); the caller frees *json_out with ap_free. */
AP_API ap_status ap_plan_json(ap_ctx *ctx, const ap_plan *plan, char **json_out);
/* 2 for an op-level plan of a general graph (a file of format "autopar-plan/2", which ap_plan_load keeps
 * whole until it is read against its graph by ap_graph_plan_estimate, _simulate or _export), 1 otherwise. The
 * transformer paths (ap_estimate, ap_simulate, ap_export, ap_plan_set, ap_plan_json) refuse a format-2 plan. */
AP_API int ap_plan_format(const ap_plan *plan);
AP_API void ap_plan_free(ap_plan *plan);

/* ---- Estimates -------------------------------------------------------------------------------- */

enum { AP_OUT_TEXT = 0, AP_OUT_JSON = 1 };

/* Predicts one plan's iteration time with its breakdown, tokens/s, MFU under three FLOP conventions and peak
 * memory per pipeline stage. Derived plan fields (dp, micro-batch count) are resolved against the model and
 * cluster first, then the plan is validated: AP_INVALID names the violated constraint. A plan that does not
 * fit in memory is still estimated (its "fits" is false). format is AP_OUT_TEXT or AP_OUT_JSON; the caller
 * frees *out with ap_free. */
AP_API ap_status ap_estimate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *plan,
                             int format, char **out);

/* Runs the event-driven simulator of the plan's pipeline schedule and writes its timeline to trace_path as a
 * Chrome trace-event JSON file (Perfetto and chrome://tracing open it; one process per pipeline stage with a
 * compute and a communication thread). The file is written to a temporary name and renamed, so a failure
 * leaves none. *out receives a summary (simulated and closed-form pipeline time) in the given format. */
AP_API ap_status ap_simulate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *plan,
                             const char *trace_path, int format, char **out);
/* The most passes (forward, backward and weight-gradient passes of one chunk and micro-batch) ap_simulate runs
 * in this context: a larger schedule fails with AP_UNSUPPORTED and a one-line message, before any memory is
 * taken for it (the timeline of --gbs 1000000 --pp 8 took 4 GB). 0 restores the default of one million;
 * AP_INVALID for a negative count. */
AP_API ap_status ap_ctx_set_simulate_limit(ap_ctx *ctx, int64_t max_passes);

/* ---- Validation against measured runs ---------------------------------------------------------- */

/* ap_validate's flags. */
enum {
  AP_VALIDATE_JSON = 1,  /* write the autopar-validate/1 document (docs/json.md) instead of a text table */
  AP_VALIDATE_SEARCH = 2 /* also run the planner on every row (ap_plan_search's search, half a second at most per
                          * row): its best plan for the row's model, devices, global batch, sequence length and
                          * precision, with best_predicted_tokens_per_s_per_gpu and best_plan in each JSON row,
                          * a column in the text table, and how many rows it matches or beats in the summary */
};

/* Predicts every row of a table of measured training runs (the CSV format of shared/reference/runs.csv,
 * documented in its README.md; a row's model_config names an HF config in the models/ folder beside the
 * CSV file) and compares: per row the predicted and measured tokens/s per GPU, their absolute percentage
 * error (ape), the predicted outcome (ok or oom) and peak memory; then a summary with the mean and median
 * ape (mape, median_ape), the worst row, Spearman's rank correlation within groups of rows on the same model
 * and gpu, the agreement on out-of-memory outcomes and, for rows that report it, the memory error. Plan
 * fields a row leaves empty are chosen as a tuned team would: the fastest plan under the cost model that
 * keeps the stated fields. A row that cannot be modelled carries "error" and counts as a miss (ape 1).
 * flags is 0 (text) or AP_VALIDATE_JSON, with AP_VALIDATE_SEARCH or-ed in for the planner's best per row. Bad input (an unreadable file, malformed CSV, a missing required
 * column, a field that does not hold what its column means) fails with a one-line message naming
 * file:line:column. The caller frees *out with ap_free. */
AP_API ap_status ap_validate(ap_ctx *ctx, const char *csv_path, int flags, char **out);
/* The same with one cluster for every row (a preset, shorthand or file, as ap_cluster_load takes; NULL: each
 * row's gpu and num_gpus, as ap_validate): the rows' gpu column is then a label, and num_gpus must equal the
 * cluster's devices or the row carries an error. `autopar run --record` writes such rows and `autopar profile`
 * such a cluster. */
AP_API ap_status ap_validate_on(ap_ctx *ctx, const char *csv_path, const char *cluster, int flags, char **out);
/* The same with a software stack for the rows whose stack column is empty (a row's own stack wins): a name of
 * the stack table (megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, llm-foundry, deepspeed,
 * autopar, any); NULL or "" for none, each such row then running on its model's default stack. An unknown
 * name fails with AP_INVALID. */
AP_API ap_status ap_validate_stack(ap_ctx *ctx, const char *csv_path, const char *cluster, const char *stack, int flags,
                                   char **out);
/* Cross-validation: the same document, each row predicted by constants that `autopar calibrate`'s fit would
 * give without its group of rows (grouping "source": the source column up to its first space; "chip": the
 * chip of its gpu, a chip no other group measures taking the nearest fitted chip's constants; "release": the
 * source's container or commit; "stack": the stack it runs on), the fit starting from the context's
 * calibration file when one is set, else from the documented defaults. The summary is validate's over those
 * predictions, with each group's figures under "cv", and every row carries an error band built from the other
 * groups' residuals (band_low, band_high, mem_band_low_bytes, mem_band_high_bytes; docs/json.md). flags is 0
 * or AP_VALIDATE_JSON. Takes about ten seconds a group. An unknown grouping fails with AP_INVALID. */
AP_API ap_status ap_validate_cv(ap_ctx *ctx, const char *csv_path, const char *grouping, int flags, char **out);

/* ---- Exports ---------------------------------------------------------------------------------- */

/* Writes a plan for a training framework (docs/exports.md). format is one of:
 *  - "megatron": a torchrun command line for Megatron-LM's pretrain_gpt.py, one flag per line with " \"
 *    continuations;
 *  - "deepspeed": a DeepSpeed JSON config (tensor and pipeline degrees under a top-level "autopar" object);
 *  - "torchtitan": a torchtitan Python config module (its dataclass registry, current sources);
 *  - "torchtitan-toml": a torchtitan TOML job config for v0.2.x;
 *  - "json": autopar's own plan format (docs/plan-format.md), which ap_plan_load reads back unchanged.
 * model may be NULL: the model the plan's "model" field names is then loaded. The plan's derived fields are
 * resolved (its device count is dp·tp·pp·cp) and it is validated against the model first (AP_INVALID names
 * the violated constraint). An unknown format is AP_INVALID listing the formats; a plan the framework cannot
 * run as planned is AP_UNSUPPORTED with the reason. The caller frees *out with ap_free. */
/* The export formats ap_export takes, i from 0: the i-th one's name ("megatron"), with a one-phrase summary
 * of what it writes in *summary (may be NULL); NULL past the last. Static storage. */
AP_API const char *ap_export_format(size_t i, const char **summary);
AP_API ap_status ap_export(ap_ctx *ctx, const ap_model *model, ap_plan *plan, const char *format, char **out);
/* Whether format can express the plan, without writing it: AP_OK, or the status and reason ap_export would
 * fail with. The planner may call it to offer only the plans a stack runs. */
AP_API ap_status ap_export_check(ap_ctx *ctx, const ap_model *model, ap_plan *plan, const char *format);

/* ---- Reports ---------------------------------------------------------------------------------- */

/* The inputs of an HTML report: JSON documents as the commands print them with --json (docs/json.md); any
 * may be NULL, and the part it feeds is then left out. Strings are borrowed for the call. */
typedef struct {
  const char *title;         /* the page's heading */
  const char *command;       /* the command line that made it, shown under the heading (may be NULL) */
  const char *estimate_json; /* an estimate document: the plan table, time breakdown and memory per stage */
  const char *search_json;   /* a search document: the explored space, the winner and the runner-ups */
  const char *trace_json;    /* the simulator's trace ({"traceEvents": …}): the pipeline timeline */
  const char *validate_json; /* a validate document: predicted against measured, error per device and stack */
  const char *compare_search_json; /* a compare-search document: the families and baselines, table and chart */
} ap_report_inputs;

/* Writes one self-contained HTML file (inline SVG, CSS and script; no network, no external URL) to out_path,
 * atomically (docs/report.md). AP_PARSE names the input that is not JSON; AP_INVALID when every input is
 * NULL; AP_IO names the path. */
AP_API ap_status ap_report_html(ap_ctx *ctx, const ap_report_inputs *in, const char *out_path);

/* Renders an answer document again (an autopar-estimate/1, autopar-search/2, autopar-validate/1 or
 * autopar-compare-search/1 document as
 * the commands print it with --json) as format AP_OUT_TEXT (the command's text) or AP_OUT_JSON (the document).
 * With a token budget (tokens: "1T", "300B", "2.5e11"; NULL = none) an estimate or search document gains a
 * "train" object (docs/json.md): the time to train on the budget from the predicted throughput (the search's
 * winner's), the device-hours and, with price_per_gpu_hour (a number as text; NULL = none), the cost; the
 * text gains the same lines. AP_PARSE when doc_json is not JSON; AP_INVALID names a bad budget or price or
 * an unknown format. The caller frees *out with ap_free. */
AP_API ap_status ap_render(ap_ctx *ctx, const char *doc_json, const char *tokens, const char *price_per_gpu_hour,
                           int format, char **out);

/* ---- Calibration ------------------------------------------------------------------------------ */

/* Fits the cost model's constants per device type and link class to the measured runs in csv_path (the
 * runs.csv format; only rows on `device` when it is not NULL), writes them to out_path (docs/calibration.md)
 * and returns a report of the error before and after, in sample and leave-one-source-out. format is
 * AP_OUT_TEXT or AP_OUT_JSON; the caller frees *out with ap_free. */
AP_API ap_status ap_calibrate(ap_ctx *ctx, const char *csv_path, const char *device, const char *out_path, int format,
                              char **out);

/* ---- Planning --------------------------------------------------------------------------------- */

/* What ap_plan_search looks for (docs/planner.md). Fill it with ap_search_opts_init, then set the fields you
 * need; strings are borrowed for the duration of the call. */
typedef struct {
  int64_t global_batch_size; /* sequences per iteration; required (>= 1) */
  int64_t seq_length;        /* tokens per sequence; 0 = the model's default */
  int top_k;                 /* plans to report, best first, in [1, 1000]; default 3 */
  double time_budget_s;      /* wall-clock limit of the search, seconds; 0 = none. When it runs out the best
                              * plans found so far are reported, and the report says the search was cut */
  double max_mem_fraction;   /* share of each device's memory a plan may use, in (0, 1]; default 1 */
  const char *objective;     /* "throughput" (the default: the shortest iteration) or "memory" (the least peak
                              * memory per device, then the shortest iteration) */
  const char *fix;           /* plan fields held fixed, "tp=8,pp=4,schedule=1f1b", with the keys of ap_plan_set
                              * except gbs and seq (a list value runs to the next key: "order=tp,cp,ep,pp,dp");
                              * NULL or "" = none */
  const char *strategies;    /* search strategies to run by name, "grid,stage-dp"; NULL or "" = all that apply */
  const char *export_format; /* keep only plans that this ap_export format can express ("megatron" admits no
                              * zero-bubble schedule); NULL = any plan */
  ap_plan *compare;          /* a plan to cost beside the winner, breakdowns side by side; NULL = none */
  const char *stack;         /* the software stack the plan runs on (megatron-lm, megatron-bridge, nemo,
                              * megatron-deepspeed, torchtitan, llm-foundry, deepspeed, autopar, any): the search
                              * chooses only what it runs. NULL = the one export_format implies, else megatron-lm
                              * for a transformer and autopar for a general graph */
} ap_search_opts;

/* Sets the defaults: no batch (it must be set), model's sequence length, top 3, no time limit, all of memory,
 * throughput, nothing fixed, all strategies, any plan, nothing to compare. */
AP_API void ap_search_opts_init(ap_search_opts *opts);

/* Searches the plans of model on cluster for the fastest (or, with objective "memory", the leanest) that fit
 * in device memory under the cost model, and explains the top opts->top_k: predicted iteration time,
 * tokens/s, MFU, peak memory per pipeline stage, the time breakdown, what bounds each (compute, bubble,
 * exposed communication, memory) and what each runner-up loses on against the winner. format is AP_OUT_TEXT
 * or AP_OUT_JSON; the caller frees *out with ap_free. When best is not NULL, *best receives the winner (the
 * caller frees it with ap_plan_free; ap_export writes it for a framework). The search runs single-threaded
 * and reports progress through the context's progress callback, which may stop it (AP_CANCELLED, with the
 * plans found so far in *out and *best).
 * When no plan fits: AP_INFEASIBLE with the closest plans in *out, each with the memory it misses by and
 * what would make it fit (more devices, a smaller micro-batch, recompute, sharding); *best is then NULL.
 * A bad option or a --fix that no plan can meet fails with AP_INVALID naming it. */
AP_API ap_status ap_plan_search(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                const ap_search_opts *opts, int format, char **out, ap_plan **best);

/* ---- Solver problem files (docs/solve.md) -------------------------------------------------------
 * A sharding problem (autopar-sharding-problem/1: per-node strategy costs, resharding matrices, aliases,
 * liveness and a memory budget, Alpa's intra-op formulation) or a stage problem (autopar-stage-problem/1:
 * per-stage costs by layer range, submesh and config, Alpa's inter-op formulation) solved by one search
 * family, independently of the cost model. */
typedef struct {
  const char *strategy;  /* NULL or "": "ilp" for a sharding problem, "inter-op" for a stage problem */
  double time_budget_s;  /* wall-clock limit in seconds; 0 = the default, 60 s */
  int64_t max_evals;     /* objective evaluations a heuristic may spend; 0 = 20,000, or no limit when a time
                          * budget is given */
  uint64_t seed;         /* seeds the randomised strategies (mcmc, mcts, rl); default 1 */
  const char *annotate;  /* greedy's seeds, "NODE=STRATEGY;NODE=STRATEGY" (indices); NULL = none */
} ap_solve_opts;

/* Sets the defaults above. */
AP_API void ap_solve_opts_init(ap_solve_opts *opts);

/* Reads the problem file at path, solves it and writes the result to *out (the caller frees it with ap_free):
 * with AP_OUT_JSON {"format": "autopar-solve/1", "objective", "choice" or "stages", "status", "lower_bound", ...},
 * with AP_OUT_TEXT a one-line summary. When the problem has no solution (or a heuristic found none):
 * AP_INFEASIBLE with *out still written (status "infeasible", no choice). A bad file fails with AP_INVALID or
 * AP_PARSE naming the file and the field; a strategy that does not apply, or the ILP where the "ilp" part is
 * not added to ctx, with AP_UNSUPPORTED. The heuristics report progress through the context's progress
 * callback every 1,024 evaluations; when it asks to stop they return the best found so far. */
AP_API ap_status ap_solve_file(ap_ctx *ctx, const char *path, const ap_solve_opts *opts, int format, char **out);

/* The i-th solve strategy's name and a one-line summary, for help texts; NULL past the last. */
AP_API const char *ap_solve_strategy_name(size_t i, const char **summary);

/* ---- Op-level plans of general graphs (docs/graph-plan.md) ------------------------------------- */

typedef struct {
  int64_t global_batch_size; /* required */
  int64_t seq_length;        /* 0 = the model's */
  const char *strategies;    /* solve strategies, comma-separated (ilp, elim-dp, greedy, mcmc, mcts, rl, recursive);
                                NULL = ilp,greedy where the "ilp" part is built, else elim-dp,greedy,mcmc */
  const char *annotate;      /* "op=S0,R;op2=R,S1": output specs the plan must keep (greedy's seeds); NULL = none */
  double max_mem_fraction;   /* share of device memory a plan may use; 0 = 1 */
  double time_budget_s;      /* per solve; 0 = the solve default */
  int64_t max_evals;         /* per heuristic solve; 0 = the solve default (20,000) */
  uint64_t seed;             /* default 1 */
} ap_graph_plan_opts;

AP_API void ap_graph_plan_opts_init(ap_graph_plan_opts *opts);
/* Nonzero for a model that `autopar plan` plans op by op (an ONNX import). */
AP_API int ap_model_is_general_graph(const ap_model *model);
/* Shards every op of the model over a logical mesh of the cluster and writes the plan (JSON format
 * "autopar-plan/2" with mesh, stages and per-op specs, or a text summary) to *out (free with ap_free).
 * AP_INVALID on a bad option or annotation (naming the op); AP_INFEASIBLE when nothing fits. */
AP_API ap_status ap_graph_plan(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                               const ap_graph_plan_opts *opts, int format, char **out);
/* Every search family on the same sharding problem and budget, against the data-parallel and Megatron
 * baselines (JSON format "autopar-compare-search/1" or a table). */
AP_API ap_status ap_compare_search(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                   const ap_graph_plan_opts *opts, int format, char **out);
/* An autopar-plan/2 plan (ap_plan_load; ap_plan_format 2) read against the model's graph on the cluster: every
 * op's specs matched to a legal strategy (AP_INVALID naming the file and the field otherwise), and its
 * iteration time and memory computed as the planner computes them, so a plan written by ap_graph_plan gives
 * its own figures again. JSON format "autopar-graph-estimate/1" or text. */
AP_API ap_status ap_graph_plan_estimate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                        const ap_plan *plan, int format, char **out);
/* The same plan played by the event simulator of op-level plans (compute and communication streams, overlap
 * of the weight-gradient all-reduces), a pipeline of several stages as one event timeline of its 1F1B schedule
 * (each stage's passes on its compute stream, the sends on the links between the stages): JSON format
 * "autopar-graph-simulate/1" or text. trace_path (NULL = none) gets that timeline as a Chrome trace-event
 * document, written last and atomically, as ap_simulate writes one. */
AP_API ap_status ap_graph_plan_simulate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                        const ap_plan *plan, const char *trace_path, int format, char **out);
/* An autopar-plan/2 document as ap_graph_plan wrote it (JSON text), read against the model's graph on the
 * cluster as ap_graph_plan_estimate reads a plan file, and written again: as the text ap_graph_plan prints for
 * the same plan (AP_OUT_TEXT), so that a caller who asked for the document need not search again for the text,
 * or as the document with its figures recomputed on that cluster (AP_OUT_JSON). AP_PARSE when doc_json is not
 * JSON; AP_INVALID naming the field as the plan reader does. */
AP_API ap_status ap_graph_plan_render(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                      const char *doc_json, int format, char **out);
/* The plan checked and written again as autopar-plan/2 JSON, on the cluster its "cluster" field names; model NULL:
 * the model file its "model_path" field names (AP_INVALID when it names none). */
AP_API ap_status ap_graph_plan_export(ap_ctx *ctx, const ap_model *model, const ap_plan *plan, char **out);
/* Each op's legal strategies on the cluster's default mesh (JSON or text). */
AP_API ap_status ap_describe_sharding(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                                      const ap_graph_plan_opts *opts, int format, char **out);

/* ---- Comparing clusters ------------------------------------------------------------------------ */

/* Plans model on each cluster of the comma-separated list (presets, shorthands or files: "h100:64,a100:128")
 * with the same search options, and ranks the clusters by the best plan's throughput and, given a token budget
 * (tokens: "1T", "300B", "2.5e11"; NULL = none, figures per 10^9 tokens), by the time to train on it and the
 * device-hours it takes; with prices (one price per device-hour
 * for all, or a comma-separated list with one per cluster) also by cost. A cluster on which nothing fits is
 * listed last, as infeasible. format is AP_OUT_TEXT or AP_OUT_JSON (format "autopar-compare-clusters/1",
 * docs/json.md); the caller frees *out with ap_free. AP_INVALID names a bad cluster or price. */
AP_API ap_status ap_compare_clusters(ap_ctx *ctx, const ap_model *model, const char *clusters,
                                     const ap_search_opts *opts, const char *tokens, const char *prices, int format,
                                     char **out);

#ifdef __cplusplus
}
#endif
#endif /* AUTOPAR_H */
