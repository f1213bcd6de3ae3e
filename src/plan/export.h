/* Exporters (plan layer): a plan written in the terms of a training framework, so that what autopar chose
 * can be run. DESIGN.md's data flow ends here: every exporter reads the same plan type and the same model
 * graph and re-derives nothing the plan already says. docs/exports.md lists, field by field, what each
 * format contains and what it cannot express.
 *
 *  - export_megatron: Megatron-LM command-line arguments (COSTMODEL.md §6.2), one flag per line with ` \`
 *    continuations, after a "# autopar plan: …" comment header.
 *  - export_deepspeed: a DeepSpeed JSON config (§6.3) with the degrees DeepSpeed does not read kept under a
 *    top-level "autopar" object.
 *  - export_torchtitan: a torchtitan job config in the legacy TOML form (§6.4).
 *
 * Each takes a plan that plan_validate accepted against g (ap_export in export_api.c makes sure of it) and
 * appends its text to out. What the framework cannot run as planned is AP_UNSUPPORTED with a one-line reason
 * in ctx, and out is then left as it was. Internal header: not installed, not part of the public API. */
#ifndef AP_PLAN_EXPORT_H
#define AP_PLAN_EXPORT_H

#include "plan/plan.h"

AP_HIDDEN ap_status export_megatron(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out);
AP_HIDDEN ap_status export_deepspeed(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out);
AP_HIDDEN ap_status export_torchtitan(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out);

/* ---- Shared by the exporters (export_api.c) ---- */

/* The sequence length the plan trains at: its own, or the model's default when it leaves it at 0. */
AP_HIDDEN int64_t export_seq_length(const plan *p, const graph *g);
/* The layers of each of the plan's pp·vpp chunks in forward order (plan_chunk_layers over the model's
 * pipeline units), written to out (PLAN_MAX_CHUNKS long). Returns false when the plan has no such split,
 * which plan_validate rules out. */
AP_HIDDEN bool export_chunk_layers(const plan *p, const graph *g, int32_t *out);
/* Appends "# note: …\n" when the plan's mesh order, over the axes of degree > 1, is not the default
 * tp-cp-ep-dp-pp (innermost first) that Megatron-LM and torchtitan both use and neither lets a user change
 * from the flags and keys exported. */
AP_HIDDEN void export_order_note(const plan *p, const char *framework, strbuf *sb);
/* Appends one line summing the plan up, without a newline: "llama-3-70b: dp 2 x tp 8 x pp 4 x cp 1, …". */
AP_HIDDEN void export_summary(const plan *p, const graph *g, strbuf *sb);

#endif
