/* One cluster described for people (hw layer; `autopar clusters --show SPEC`): rendered from the cluster's
 * JSON description (ap_cluster_describe_json, the autopar-cluster/1 document, docs/json.md) and from nothing
 * else, so that the text and --json cannot disagree: what it is, where it came from, what a shorthand without
 * a count was taken to mean, and per node group its device, its host side (offload) and its links. */
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "hw/hw_json.h"

static const double GIB = 1073741824.0;
static const char CONT[] = "            "; /* under a line's text, past its label */

/* "450 GB/s", "28 GB/s": link and memory bandwidths in decimal units, as datasheets give them. */
static void put_bw(strbuf *sb, double bps) {
  if (bps >= 1e12) sb_printf(sb, "%.3g TB/s", bps / 1e12);
  else sb_printf(sb, "%.3g GB/s", bps / 1e9);
}

static void put_device(strbuf *out, const json_t *d) {
  strbuf line = {0}, *sb = &line;
  sb_printf(sb, "%s", jd_gets(d, "name"));
  if (*jd_gets(d, "description")) sb_printf(sb, " (%s)", jd_gets(d, "description"));
  sb_printf(sb, ": %.1f GiB at ", jd_getn(d, "mem_bytes") / GIB);
  put_bw(sb, jd_getn(d, "mem_bw_Bps"));
  const json_t *peak = jd_at(d, "peak_flop_per_s");
  const char *key;
  json_t *v;
  bool first = true;
  json_object_foreach((json_t *)peak, key, v) {
    if (!json_is_number(v) || (strcmp(key, "bf16") != 0 && strcmp(key, "fp8") != 0)) continue; /* training rates */
    sb_printf(sb, "%s %s %.4g TFLOP/s", first ? "; dense" : ",", key, json_number_value(v) / 1e12);
    first = false;
  }
  if (jd_getn(d, "tdp_w") > 0) sb_printf(sb, "; %.0f W", jd_getn(d, "tdp_w"));
  sb_wrap(out, "  device    ", CONT, line.buf ? line.buf : "", AP_TEXT_WIDTH);
  sb_free(&line);
  if (*jd_gets(d, "host_link")) {
    sb_printf(out, "            host link %s, ", jd_gets(d, "host_link"));
    put_bw(out, jd_getn(d, "host_link_bw_Bps"));
    sb_puts(out, " per direction\n");
  }
}

static void put_host(strbuf *sb, const json_t *h) {
  if (!h) {
    sb_puts(sb, "  host      not stated: no offload to host memory or NVMe on this node (docs/formats.md \"host\")\n");
    return;
  }
  sb_puts(sb, "  host      ");
  if (jd_getn(h, "mem_bytes") > 0) {
    double m = jd_getn(h, "mem_bytes");
    if (m >= 1024 * GIB) sb_printf(sb, "%.3g TiB memory", m / (1024 * GIB));
    else sb_printf(sb, "%.0f GiB memory", m / GIB);
    if (jd_getn(h, "mem_bw_Bps") > 0) sb_puts(sb, " at "), put_bw(sb, jd_getn(h, "mem_bw_Bps"));
  } else {
    sb_puts(sb, "memory not stated");
  }
  if (jd_getn(h, "nvme_bytes") > 0) sb_printf(sb, "; NVMe %.2f TB", jd_getn(h, "nvme_bytes") / 1e12);
  else sb_puts(sb, "; NVMe capacity not stated (NVMe offload not checked against it)");
  if (jd_getn(h, "nvme_bw_Bps") > 0) sb_puts(sb, " at "), put_bw(sb, jd_getn(h, "nvme_bw_Bps"));
  sb_puts(sb, "\n");
}

static void put_level(strbuf *out, const json_t *lv, bool first) {
  strbuf line = {0}, *sb = &line;
  sb_printf(sb, "%s: %s", jd_gets(lv, "name"), jd_gets(lv, "topology"));
  if (jd_geti(lv, "domain_devices") > 0) sb_printf(sb, ", %lld devices per domain", (long long)jd_geti(lv, "domain_devices"));
  sb_puts(sb, ", ");
  put_bw(sb, jd_getn(lv, "bw_Bps"));
  sb_printf(sb, " per device per direction, latency %.3g µs", jd_getn(lv, "latency_s") * 1e6);
  if (jd_geti(lv, "nics_per_node") > 0) {
    sb_printf(sb, "; %lld NICs of ", (long long)jd_geti(lv, "nics_per_node"));
    put_bw(sb, jd_getn(lv, "nic_bw_Bps"));
    sb_printf(sb, " per node, %.3g device%s per NIC", jd_getn(lv, "devices_per_nic"), jd_getn(lv, "devices_per_nic") == 1 ? "" : "s");
  }
  if (jd_getn(lv, "oversubscription") > 1) sb_printf(sb, "; oversubscribed %.3g:1", jd_getn(lv, "oversubscription"));
  sb_wrap(out, first ? "  links     " : CONT, CONT, line.buf ? line.buf : "", AP_TEXT_WIDTH);
  sb_free(&line);
}

ap_status ap_cluster_describe_text(ap_ctx *ctx, const ap_cluster *cluster, char **text_out) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!text_out) return ctx_fail(ctx, AP_INVALID, "ap_cluster_describe_text: text_out must not be NULL");
  *text_out = NULL;
  if (!cluster) return ctx_fail(ctx, AP_INVALID, "ap_cluster_describe_text: no cluster");
  char *js = NULL;
  ap_status st = ap_cluster_describe_json(ctx, cluster, &js);
  if (st) return st;
  json_t *doc = mem_json_loadb(js, strlen(js), 0, NULL);
  free(js);
  if (!doc) return ctx_fail(ctx, AP_NOMEM, "out of memory describing the cluster");
  strbuf sb = {0};
  sb_printf(&sb, "cluster   %s", jd_gets(doc, "name"));
  if (*jd_gets(doc, "description")) sb_printf(&sb, ": %s", jd_gets(doc, "description"));
  sb_printf(&sb, "\norigin    %s\ndevices   %lld\n", jd_gets(doc, "origin"), (long long)jd_geti(doc, "n_devices"));
  if (*jd_gets(doc, "assumed")) sb_wrap(&sb, "assumed   ", CONT, jd_gets(doc, "assumed"), AP_TEXT_WIDTH);
  const json_t *groups = jd_at(doc, "node_groups");
  for (size_t i = 0; i < json_array_size(groups); i++) {
    const json_t *g = json_array_get(groups, i);
    sb_printf(&sb, "\nnode group %zu: %lld node%s of %lld devices", i, (long long)jd_geti(g, "n_nodes"),
              jd_geti(g, "n_nodes") == 1 ? "" : "s", (long long)jd_geti(g, "devices_per_node"));
    if (*jd_gets(g, "node")) sb_printf(&sb, " (%s)", jd_gets(g, "node"));
    sb_puts(&sb, "\n");
    put_device(&sb, jd_at(g, "device"));
    put_host(&sb, jd_at(g, "host"));
    const json_t *lv = jd_at(g, "levels");
    for (size_t l = 0; l < json_array_size(lv); l++) put_level(&sb, json_array_get(lv, l), l == 0);
  }
  sb_puts(&sb, "\n(--json for the same as a cluster file, autopar-cluster/1)\n");
  json_decref(doc);
  *text_out = sb_take(&sb);
  return *text_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory describing the cluster");
}
