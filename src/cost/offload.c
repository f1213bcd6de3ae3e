/* Offload of model states to the host (cost layer): the time and host memory of a plan's offload_optimizer
 * and offload_param (plan.h), over the device's host link (PCIe, or NVLink-C2C on GH200/GB200), the node's
 * host memory bandwidth and capacity and its NVMe bandwidth (hw.h; docs/formats.md "host").
 *
 * Optimizer offload, ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model
 * Training", §4.1-4.2): the fp32 master weights, Adam's moments and the fp32 gradients live in host memory
 * (16 bytes per parameter of the rank's optimizer shard); each iteration the rank's 16-bit gradient shard
 * goes to the host (2 bytes per parameter), the CPU runs Adam (COST_ADAM_STEP_BYTES_PER_PARAM per parameter,
 * bound by host memory bandwidth, which the node's devices share) and the updated 16-bit parameters come back
 * (2 bytes per parameter). With NVMe (ZeRO-Infinity, Rajbhandari et al. 2021, §5 "infinity offload engine")
 * the optimizer states are also read from and written back to the node's NVMe each step (12 + 12 bytes per
 * parameter), the drives shared by the node's devices; they hold the fp32 master weights and both moments
 * (12 bytes per parameter; ZeRO-Infinity §5.1), and with parameter offload to NVMe the 16-bit parameters too
 * (2 bytes), which must fit in the node's NVMe capacity (host.nvme_bytes) where the cluster states it.
 * Parameter offload (ZeRO-Infinity §5, with ZeRO-3): the 16-bit parameter shard lives on the host (or NVMe)
 * and is fetched over the host link for every micro-batch's forward and backward (2 passes × 2 bytes per
 * parameter); from NVMe the fetch streams through host memory, bounded by the slower of the two.
 * None of this is assumed to overlap with compute: ZeRO-Offload's overlap of the gradient copy with backward
 * and its one-step delayed update are not modelled, so the figure is an upper bound, and the host-link
 * transfer of the moved states is a lower bound of it by construction. */
#include <math.h>

#include "cost/internal.h"

ap_status cost_offload(ap_ctx *ctx, const cost_env *env, const plan *p, int group, double shard_params,
                       double *time_s, double *host_bytes_per_node, double *nvme_bytes_per_node) {
  *time_s = 0;
  *host_bytes_per_node = *nvme_bytes_per_node = 0;
  if (p->offload_optimizer == PLAN_OFFLOAD_NONE && p->offload_param == PLAN_OFFLOAD_NONE) return AP_OK;
  const hw_cluster *hc = cost_env_cluster(env);
  const hw_node_group *g = &hc->groups[group >= 0 && group < hc->n_groups ? group : 0];
  const hw_host *h = &g->host;
  bool nvme = p->offload_optimizer == PLAN_OFFLOAD_NVME || p->offload_param == PLAN_OFFLOAD_NVME;
  if (!(g->device.host_link_bw_Bps > 0) || !(h->mem_bytes > 0) || !(h->mem_bw_Bps > 0) || (nvme && !(h->nvme_bw_Bps > 0)))
    return ctx_fail(ctx, AP_INVALID,
                    "offload needs the host side of %s: host_link_bw_Bps in its device file and host.mem_bytes, "
                    "host.mem_bw_Bps%s in its cluster file (docs/formats.md)",
                    g->device.name, nvme ? " and host.nvme_bw_Bps" : "");
  double per_node = (double)g->devices_per_node;
  double link = g->device.host_link_bw_Bps, host_bw = h->mem_bw_Bps / per_node, nvme_bw = h->nvme_bw_Bps / per_node;
  double t = 0, host = 0, disk = 0;
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE) {
    t += 4.0 * shard_params / link;                                   /* gradients down, parameters up */
    t += shard_params * COST_ADAM_STEP_BYTES_PER_PARAM / host_bw;     /* Adam on the CPU */
    if (p->offload_optimizer == PLAN_OFFLOAD_NVME) t += 24.0 * shard_params / nvme_bw, disk += 12.0 * shard_params;
    else host += 16.0 * shard_params;
  }
  if (p->offload_param != PLAN_OFFLOAD_NONE) {
    double bytes = 2.0 * 2.0 * (double)p->n_micro_batches * shard_params;
    double fetch_s = bytes / link;
    if (p->offload_param == PLAN_OFFLOAD_NVME) fetch_s = fmax(fetch_s, bytes / nvme_bw), disk += 2.0 * shard_params;
    else host += 2.0 * shard_params;
    t += fetch_s;
  }
  *time_s = t;
  *host_bytes_per_node = host * per_node;
  *nvme_bytes_per_node = disk * per_node;
  return AP_OK;
}
