/* Clusters and presets as output: the JSON description of a loaded cluster, which is itself a valid cluster
 * file (loading it gives the same cluster back), and the lists of built-in presets as JSON and as text for
 * `autopar clusters`. Numbers are written in the shortest form that reads back to the same double. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "hw/hw_json.h"

/* Numbers go through the one JSON number writer, which writes the shortest form that reads back exactly. */
#define put_num jx_sb_num

static void put_key(strbuf *sb, bool *first, const char *key) {
  if (!*first) sb_puts(sb, ",");
  *first = false;
  jx_sb_str(sb, key);
  sb_puts(sb, ":");
}

static void put_device(strbuf *sb, const hw_device *d) {
  bool first = true;
  sb_puts(sb, "{");
  put_key(sb, &first, "name");
  jx_sb_str(sb, d->name);
  if (d->vendor[0]) {
    put_key(sb, &first, "vendor");
    jx_sb_str(sb, d->vendor);
  }
  if (d->description[0]) {
    put_key(sb, &first, "description");
    jx_sb_str(sb, d->description);
  }
  if (d->default_node[0]) {
    put_key(sb, &first, "node");
    jx_sb_str(sb, d->default_node);
  }
  if (d->chip[0]) {
    put_key(sb, &first, "chip");
    jx_sb_str(sb, d->chip);
  }
  if (d->family[0]) {
    put_key(sb, &first, "family");
    jx_sb_str(sb, d->family);
  }
  put_key(sb, &first, "peak_flop_per_s");
  sb_puts(sb, "{");
  bool first_dtype = true;
  for (int t = 0; t < HW_DTYPE_COUNT; t++) {
    if (!(d->peak_flop_per_s[t] > 0)) continue;
    put_key(sb, &first_dtype, hw_dtype_name((hw_dtype)t));
    put_num(sb, d->peak_flop_per_s[t]);
  }
  sb_puts(sb, "}");
  put_key(sb, &first, "mem_bytes");
  sb_printf(sb, "%lld", (long long)d->mem_bytes);
  put_key(sb, &first, "mem_bw_Bps");
  put_num(sb, d->mem_bw_Bps);
  if (d->tdp_w > 0) {
    put_key(sb, &first, "tdp_w");
    put_num(sb, d->tdp_w);
  }
  if (d->host_link[0]) {
    put_key(sb, &first, "host_link");
    jx_sb_str(sb, d->host_link);
  }
  if (d->host_link_bw_Bps > 0) {
    put_key(sb, &first, "host_link_bw_Bps");
    put_num(sb, d->host_link_bw_Bps);
  }
  sb_puts(sb, "}");
}

static void put_level(strbuf *sb, const hw_link_level *lv, bool outermost) {
  bool first = true;
  sb_puts(sb, "{");
  put_key(sb, &first, "name");
  jx_sb_str(sb, lv->name);
  put_key(sb, &first, "topology");
  jx_sb_str(sb, hw_topology_name(lv->topology));
  if (!outermost) {
    put_key(sb, &first, "domain_devices");
    sb_printf(sb, "%lld", (long long)lv->domain_devices);
  }
  put_key(sb, &first, "bw_Bps");
  put_num(sb, lv->bw_Bps);
  put_key(sb, &first, "latency_s");
  put_num(sb, lv->latency_s);
  put_key(sb, &first, "oversubscription");
  put_num(sb, lv->oversubscription);
  if (outermost) {
    if (lv->nics_per_node > 0) {
      put_key(sb, &first, "nics_per_node");
      sb_printf(sb, "%lld", (long long)lv->nics_per_node);
    }
    if (lv->nic_bw_Bps > 0) {
      put_key(sb, &first, "nic_bw_Bps");
      put_num(sb, lv->nic_bw_Bps);
    }
    put_key(sb, &first, "devices_per_nic");
    put_num(sb, lv->devices_per_nic);
  }
  sb_puts(sb, "}");
}

static void put_cluster(strbuf *sb, const hw_cluster *c) {
  sb_puts(sb, "{\"format\":\"autopar-cluster/1\",\"name\":");
  jx_sb_str(sb, c->name);
  if (c->description[0]) {
    sb_puts(sb, ",\"description\":");
    jx_sb_str(sb, c->description);
  }
  sb_puts(sb, ",\"origin\":");
  jx_sb_str(sb, c->origin);
  if (c->assumed) { /* what a shorthand without a count was taken to mean (a cluster file reads the key back) */
    sb_puts(sb, ",\"assumed\":");
    jx_sb_str(sb, c->assumed);
  }
  sb_printf(sb, ",\"n_devices\":%lld,\"node_groups\":[", (long long)c->n_devices);
  for (int i = 0; i < c->n_groups; i++) {
    const hw_node_group *g = &c->groups[i];
    sb_puts(sb, i ? ",{" : "{");
    if (g->node_name[0]) {
      sb_puts(sb, "\"node\":");
      jx_sb_str(sb, g->node_name);
      sb_puts(sb, ",");
    }
    sb_printf(sb, "\"n_nodes\":%lld,\"devices_per_node\":%lld,\"device\":", (long long)g->n_nodes,
              (long long)g->devices_per_node);
    put_device(sb, &g->device);
    /* The host side (offload), when stated: the cluster file's "host" object. */
    const hw_host *h = &g->host;
    if (h->mem_bytes > 0 || h->mem_bw_Bps > 0 || h->nvme_bw_Bps > 0 || h->nvme_bytes > 0) {
      bool hf = true;
      sb_puts(sb, ",\"host\":{");
      const char *names[] = {"mem_bytes", "mem_bw_Bps", "nvme_bw_Bps", "nvme_bytes"};
      const double vals[] = {h->mem_bytes, h->mem_bw_Bps, h->nvme_bw_Bps, h->nvme_bytes};
      for (int k = 0; k < 4; k++)
        if (vals[k] > 0) {
          put_key(sb, &hf, names[k]);
          put_num(sb, vals[k]);
        }
      sb_puts(sb, "}");
    }
    sb_puts(sb, ",\"levels\":[");
    for (int l = 0; l < g->n_levels; l++) {
      if (l) sb_puts(sb, ",");
      put_level(sb, &g->levels[l], l == g->n_levels - 1);
    }
    sb_puts(sb, "]}");
  }
  sb_puts(sb, "]}");
}

static ap_status take(ap_ctx *ctx, strbuf *sb, char **out) {
  *out = sb_take(sb);
  if (!*out) {
    sb_free(sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory writing the cluster description");
  }
  return AP_OK;
}

ap_status ap_cluster_describe_json(ap_ctx *ctx, const ap_cluster *cluster, char **json_out) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!json_out) return ctx_fail(ctx, AP_INVALID, "ap_cluster_describe_json: json_out must not be NULL");
  *json_out = NULL;
  if (!cluster) return ctx_fail(ctx, AP_INVALID, "ap_cluster_describe_json: no cluster");
  strbuf sb = {0};
  put_cluster(&sb, &cluster->c);
  return take(ctx, &sb, json_out);
}

/* ---- Preset lists -------------------------------------------------------------------------------------------- */

static void put_aliases(strbuf *sb, const embedded_file *f) {
  json_t *root = mem_json_loadb(f->text, f->n_bytes, 0, NULL); /* json_loadb (core/alloc.h) */
  sb_puts(sb, "[");
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(root, "aliases"), i, a) {
    if (i) sb_puts(sb, ",");
    jx_sb_str(sb, json_string_value(a) ? json_string_value(a) : "");
  }
  sb_puts(sb, "]");
  json_decref(root);
}

/* Calls one of the writers below for every preset of a kind, in file order; stops at the first failure. */
typedef void (*preset_writer)(strbuf *sb, const embedded_file *f, const void *obj, bool first);

static void write_cluster_entry(strbuf *sb, const embedded_file *f, const void *obj, bool first) {
  const hw_cluster *c = obj;
  const hw_node_group *g = &c->groups[0];
  sb_puts(sb, first ? "{\"name\":" : ",{\"name\":");
  jx_sb_str(sb, c->name);
  sb_puts(sb, ",\"aliases\":");
  put_aliases(sb, f);
  sb_puts(sb, ",\"description\":");
  jx_sb_str(sb, c->description);
  sb_puts(sb, ",\"device\":");
  jx_sb_str(sb, g->device.name);
  sb_printf(sb, ",\"devices_per_node\":%lld,\"n_nodes\":%lld,\"levels\":[", (long long)g->devices_per_node,
            (long long)g->n_nodes);
  for (int l = 0; l < g->n_levels; l++) {
    if (l) sb_puts(sb, ",");
    put_level(sb, &g->levels[l], l == g->n_levels - 1);
  }
  sb_puts(sb, "],\"file\":");
  jx_sb_str(sb, f->path);
  sb_puts(sb, "}");
}

static void write_device_entry(strbuf *sb, const embedded_file *f, const void *obj, bool first) {
  const hw_device *d = obj;
  sb_puts(sb, first ? "{\"name\":" : ",{\"name\":");
  jx_sb_str(sb, d->name);
  sb_puts(sb, ",\"aliases\":");
  put_aliases(sb, f);
  sb_puts(sb, ",\"device\":");
  put_device(sb, d);
  sb_puts(sb, ",\"file\":");
  jx_sb_str(sb, f->path);
  sb_puts(sb, "}");
}

static ap_status for_each_preset(ap_ctx *ctx, hw_preset_kind kind, strbuf *sb, preset_writer write) {
  size_t n = 0;
  const embedded_file *files = embedded_files(&n);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (!hw_preset_is(&files[i], kind)) continue;
    ap_status st;
    if (kind == HW_PRESET_CLUSTER) {
      ap_cluster *cl = NULL;
      st = hw_cluster_parse(ctx, files[i].path, files[i].text, files[i].n_bytes, &cl);
      if (!st) write(sb, &files[i], &cl->c, first);
      ap_cluster_free(cl);
    } else {
      hw_device d;
      st = hw_device_parse(ctx, files[i].path, files[i].text, files[i].n_bytes, &d);
      if (!st) write(sb, &files[i], &d, first);
    }
    if (st) return st;
    first = false;
  }
  return AP_OK;
}

ap_status ap_clusters_list_json(ap_ctx *ctx, char **json_out) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!json_out) return ctx_fail(ctx, AP_INVALID, "ap_clusters_list_json: json_out must not be NULL");
  *json_out = NULL;
  strbuf sb = {0};
  sb_puts(&sb, "{\"format\":\"autopar-clusters/1\",\"clusters\":[");
  ap_status st = for_each_preset(ctx, HW_PRESET_CLUSTER, &sb, write_cluster_entry);
  sb_puts(&sb, "],\"devices\":[");
  if (!st) st = for_each_preset(ctx, HW_PRESET_DEVICE, &sb, write_device_entry);
  sb_puts(&sb, "]}");
  if (st) {
    sb_free(&sb);
    return st;
  }
  return take(ctx, &sb, json_out);
}

/* ---- Text, rendered from the list's document ------------------------------------------------------------------ */

static void text_clusters(strbuf *sb, const json_t *doc) {
  const json_t *arr = jd_at(doc, "clusters");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *c = json_array_get(arr, i);
    if (i == 0)
      sb_puts(sb, "Cluster presets (--cluster NAME, NAME:DEVICES or NAME:NODESxDEVICES):\n"
                  "  name              device      per node  links (per device, each direction)\n");
    sb_printf(sb, "  %-17s %-11s %-9lld ", jd_gets(c, "name"), jd_gets(c, "device"), (long long)jd_geti(c, "devices_per_node"));
    const json_t *levels = jd_at(c, "levels");
    size_t n = json_array_size(levels);
    for (size_t l = 0; l < n; l++) {
      const json_t *lv = json_array_get(levels, l);
      if (l + 1 < n)
        sb_printf(sb, "%s %.0f GB/s in %lld, ", jd_gets(lv, "name"), jd_getn(lv, "bw_Bps") / 1e9,
                  (long long)jd_geti(lv, "domain_devices"));
      else
        sb_printf(sb, "%s %.1f GB/s\n", jd_gets(lv, "name"), jd_getn(lv, "bw_Bps") / jd_getn(lv, "oversubscription") / 1e9);
    }
  }
  arr = jd_at(doc, "devices");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *d = jd_at(json_array_get(arr, i), "device");
    if (i == 0)
      sb_puts(sb, "\nDevices (--cluster DEVICE:COUNT uses the device's node preset):\n"
                  "  name        bf16 TFLOP/s  memory GiB  memory TB/s  node preset\n");
    const char *node = jd_gets(d, "node");
    sb_printf(sb, "  %-11s %-13.1f %-11.1f %-12.2f %s\n", jd_gets(d, "name"), jd_getn(d, "peak_flop_per_s.bf16") / 1e12,
              (double)jd_geti(d, "mem_bytes") / (1024.0 * 1024.0 * 1024.0), jd_getn(d, "mem_bw_Bps") / 1e12,
              *node ? node : "-");
  }
}

ap_status ap_clusters_list_text(ap_ctx *ctx, char **text_out) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!text_out) return ctx_fail(ctx, AP_INVALID, "ap_clusters_list_text: text_out must not be NULL");
  *text_out = NULL;
  char *js = NULL;
  ap_status st = ap_clusters_list_json(ctx, &js);
  if (st) return st;
  json_t *doc = json_loads(js, 0, NULL);
  free(js);
  strbuf sb = {0};
  if (doc) text_clusters(&sb, doc);
  else sb.oom = true;
  json_decref(doc);
  return take(ctx, &sb, text_out);
}
