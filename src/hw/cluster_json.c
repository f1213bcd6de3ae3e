/* The cluster file reader (format in docs/formats.md, "Cluster and device files"). A cluster file holds
 * either one node type (device, devices_per_node, levels, n_nodes) or "node_groups", a list of them; a node
 * type may start from a preset ("node": "dgx-h100") and override any of its fields. "inter_node" overrides
 * the outermost link level of every group. After reading, the cluster is checked as a whole: the groups
 * agree on the number of levels, domains nest and align with nodes, and the device count stays in range.
 * Everything the cluster keeps is allocated from its arena; nothing else outlives the call. The public
 * handle (ap_cluster) is made and freed here; cluster.c (specs, shorthands, rank geometry) calls this file,
 * never the reverse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/hw_json.h"

/* Presets may start from other presets, but not without end. */
enum { MAX_PRESET_DEPTH = 3 };

/* The fields each kind of object may hold; anything else is reported as an unknown field. */
static const char *const level_keys[] = {
    "name",          "domain_devices", "topology",        "bw_Bps",  "latency_s", "oversubscription",
    "nics_per_node", "nic_bw_Bps",     "devices_per_nic", "sources",
};
static const char *const node_keys[] = {"node", "device", "devices_per_node", "n_nodes", "levels", "host", "sources"};
static const char *const host_keys[] = {"mem_bytes", "mem_bw_Bps", "nvme_bw_Bps", "sources"};
static const char *const top_keys[] = {
    "node", "device",      "devices_per_node", "n_nodes",   "levels",      "sources",    "name",
    "aliases", "description", "origin",        "n_devices", "node_groups", "inter_node", "format",
    "host",
};
static const char *const inter_keys[] = {
    "name",          "bw_Bps",     "latency_s",       "oversubscription",
    "nics_per_node", "nic_bw_Bps", "devices_per_nic", "sources",
};

/* ---- Link levels ---------------------------------------------------------------------------------- */

/* Reads one level. Fields not given stay 0; derive_network fills them once devices_per_node is known. */
static ap_status read_level(const jx_src *s, json_t *obj, bool outermost, hw_link_level *out) {
  memset(out, 0, sizeof *out);
  out->oversubscription = 1;
  if (!json_is_object(obj)) return jx_fail(s, "", "expected a link level object");
  ap_status st = hwj_check_keys(s, obj, level_keys, AP_COUNT(level_keys));
  if (!st) st = hwj_check_meta(s, obj);
  if (!st) st = hwj_text(s, obj, "name", true, out->name, sizeof out->name);
  if (st) return st;
  char topo[HW_NAME_MAX] = "switch";
  st = hwj_text(s, obj, "topology", false, topo, sizeof topo);
  if (st) return st;
  if (!hw_topology_from_name(topo, &out->topology))
    return jx_fail(s, "topology", "expected \"switch\" or \"mesh\", got \"%s\"", topo);
  bool has_domain = false, has_nics = false, has_nic_bw = false, has_per_nic = false;
  st = jx_i64(s, obj, "domain_devices", !outermost, 1, HW_MAX_DEVICES, &out->domain_devices, &has_domain);
  if (!st) st = hwj_positive(s, obj, "bw_Bps", false, &out->bw_Bps, NULL);
  if (!st) st = hwj_nonnegative(s, obj, "latency_s", true, &out->latency_s, NULL);
  if (!st) st = jx_f64(s, obj, "oversubscription", false, 1, 1e6, &out->oversubscription, NULL);
  if (!st) st = jx_i64(s, obj, "nics_per_node", false, 1, HW_MAX_DEVICES, &out->nics_per_node, &has_nics);
  if (!st) st = hwj_positive(s, obj, "nic_bw_Bps", false, &out->nic_bw_Bps, &has_nic_bw);
  if (!st) st = hwj_positive(s, obj, "devices_per_nic", false, &out->devices_per_nic, &has_per_nic);
  if (st) return st;
  if (outermost) {
    if (has_domain)
      return jx_fail(s, "domain_devices", "not allowed on the outermost level, whose domain is the whole cluster");
    if (out->topology == HW_TOPO_MESH)
      return jx_fail(s, "topology", "expected \"switch\" on the outermost level (a mesh is a level inside nodes)");
  } else {
    const char *nic_key = has_nics ? "nics_per_node" : has_nic_bw ? "nic_bw_Bps" : "devices_per_nic";
    if (has_nics || has_nic_bw || has_per_nic)
      return jx_fail(s, nic_key, "only the outermost level (the network) has NICs");
    if (!(out->bw_Bps > 0)) return jx_fail(s, "bw_Bps", "required field missing");
    if (out->topology == HW_TOPO_MESH && out->domain_devices < 2)
      return jx_fail(s, "domain_devices", "expected at least 2 devices in a mesh, got %lld",
                     (long long)out->domain_devices);
  }
  return AP_OK;
}

static ap_status read_levels(const jx_src *s, json_t *arr, hw_node_group *g) {
  if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > HW_MAX_LEVELS)
    return jx_fail(s, "levels", "expected an array of 1 to %d link levels, innermost first", HW_MAX_LEVELS);
  g->n_levels = (int)json_array_size(arr);
  for (int l = 0; l < g->n_levels; l++) {
    char buf[192];
    jx_src sub;
    hwj_child(s, "levels", l, buf, sizeof buf, &sub);
    ap_status st = read_level(&sub, json_array_get(arr, (size_t)l), l == g->n_levels - 1, &g->levels[l]);
    if (st) return st;
  }
  return AP_OK;
}

/* Fills what the outermost level left to be derived: devices per NIC from the NIC count, and the
 * per-device bandwidth from the NICs' when it was not stated. */
static ap_status derive_network(const jx_src *s, hw_node_group *g) {
  hw_link_level *net = &g->levels[g->n_levels - 1];
  if (!(net->devices_per_nic > 0))
    net->devices_per_nic = net->nics_per_node > 0 ? (double)g->devices_per_node / (double)net->nics_per_node : 1;
  if (!(net->bw_Bps > 0)) {
    if (!(net->nic_bw_Bps > 0)) {
      char buf[192];
      jx_src sub;
      hwj_child(s, "levels", g->n_levels - 1, buf, sizeof buf, &sub);
      return jx_fail(&sub, "bw_Bps", "required field missing (or give nic_bw_Bps and nics_per_node)");
    }
    net->bw_Bps = net->nic_bw_Bps / net->devices_per_nic;
  }
  return AP_OK;
}

/* A node type read from a preset keeps its links when a spec changes devices_per_node (a partial node, as
 * in "dgx-h100:2x4"): domains of whole nodes scale with the node, and the NICs stay one per the same number
 * of devices, so per-device bandwidths do not change. */
static void rescale_node(hw_node_group *g, int64_t new_dpn) {
  int64_t old_dpn = g->devices_per_node;
  for (int l = 0; l + 1 < g->n_levels; l++) {
    int64_t d = g->levels[l].domain_devices;
    if (d < old_dpn || d % old_dpn != 0) continue;
    int64_t scaled = d / old_dpn * new_dpn;
    /* A mesh level's bandwidth is the sum of its links to the peers of its domain: fewer peers, fewer links. */
    if (g->levels[l].topology == HW_TOPO_MESH && scaled >= 2)
      g->levels[l].bw_Bps = g->levels[l].bw_Bps / (double)(d - 1) * (double)(scaled - 1);
    g->levels[l].domain_devices = scaled;
  }
  hw_link_level *net = &g->levels[g->n_levels - 1];
  if (net->nics_per_node > 0)
    net->nics_per_node = (net->nics_per_node * new_dpn) % old_dpn == 0 ? net->nics_per_node * new_dpn / old_dpn : 0;
  g->devices_per_node = new_dpn;
}

/* ---- Node types ----------------------------------------------------------------------------------- */

static ap_status read_node(const jx_src *s, json_t *obj, int depth, hw_node_group *g);

/* Loads the node type of cluster preset `name` into g. */
static ap_status read_preset_node(const jx_src *s, const char *name, int depth, hw_node_group *g) {
  if (depth >= MAX_PRESET_DEPTH)
    return jx_fail(s, "node", "presets nest more than %d deep (is there a cycle?)", MAX_PRESET_DEPTH);
  const embedded_file *f = hw_preset_find(HW_PRESET_CLUSTER, name);
  if (!f) {
    char hint[256];
    hw_preset_suggest(name, false, true, hint, sizeof hint);
    const char *w = s->where ? s->where : "";
    return ctx_fail(s->ctx, AP_NOTFOUND, "%s: %s%snode: unknown cluster preset '%.80s'%s%s%s", s->file, w,
                    *w ? "." : "", name, *hint ? " (did you mean " : "", hint, *hint ? "?)" : "");
  }
  json_t *root = NULL;
  ap_status st = jx_parse(s->ctx, f->path, f->text, f->n_bytes, &root);
  if (st) return st;
  jx_src ps = {s->ctx, f->path, ""};
  if (!json_is_object(root))
    st = ctx_fail(s->ctx, AP_INVALID, "%s: expected a JSON object at the top level", f->path);
  else if (json_object_get(root, "node_groups"))
    st = jx_fail(s, "node", "preset '%s' has several node groups; name a preset of one node type", name);
  else
    st = read_node(&ps, root, depth + 1, g);
  const char *own = st ? NULL : json_string_value(json_object_get(root, "name")); /* the parsed preset's name */
  if (!st) snprintf(g->node_name, sizeof g->node_name, "%s", own ? own : "");
  json_decref(root);
  return st;
}

/* Reads "device": a preset name or an inline device object. */
static ap_status read_node_device(const jx_src *s, json_t *v, hw_device *out) {
  char buf[192];
  jx_src sub;
  hwj_child(s, "device", -1, buf, sizeof buf, &sub);
  if (json_is_object(v)) return hw_device_from_json(&sub, v, out);
  if (!json_is_string(v)) return jx_fail(s, "device", "expected a device name or a device object");
  ap_status st = hw_device_find(s->ctx, json_string_value(v), out);
  if (st == AP_NOTFOUND) {
    /* Put the location in front of the lookup's message, which names no file. */
    char msg[sizeof s->ctx->error];
    snprintf(msg, sizeof msg, "%s", ap_ctx_error(s->ctx));
    return ctx_fail(s->ctx, st, "%s: %s: %s", s->file, sub.where, msg);
  }
  return st;
}

/* Reads one node type. Starting from a preset when "node" is given, then each field present overrides. */
static ap_status read_node(const jx_src *s, json_t *obj, int depth, hw_node_group *g) {
  memset(g, 0, sizeof *g);
  g->n_nodes = 1;
  const char *preset = NULL;
  bool from_preset = false;
  ap_status st = jx_str(s, obj, "node", false, &preset, &from_preset);
  if (!st && from_preset) st = read_preset_node(s, preset, depth, g);
  if (st) return st;

  json_t *dev = jx_lookup(obj, "device", NULL);
  if (dev) st = read_node_device(s, dev, &g->device);
  else if (!from_preset) st = jx_fail(s, "device", "required field missing (or name a preset with \"node\")");
  if (st) return st;

  int64_t dpn = 0;
  bool has_dpn = false;
  st = jx_i64(s, obj, "devices_per_node", !from_preset, 1, HW_MAX_DEVICES, &dpn, &has_dpn);
  if (!st) st = jx_i64(s, obj, "n_nodes", false, 1, HW_MAX_DEVICES, &g->n_nodes, NULL);
  if (st) return st;

  json_t *levels = jx_lookup(obj, "levels", NULL);
  if (levels) {
    if (has_dpn) g->devices_per_node = dpn;
    st = read_levels(s, levels, g);
  } else if (!from_preset) {
    st = jx_fail(s, "levels", "required field missing (or name a preset with \"node\")");
  } else if (has_dpn && dpn != g->devices_per_node) {
    rescale_node(g, dpn);
  }
  if (st) return st;
  /* The host side: each field given replaces the preset's. */
  json_t *host = jx_lookup(obj, "host", NULL);
  if (host) {
    jx_src hs;
    char buf[64];
    hwj_child(s, "host", -1, buf, sizeof buf, &hs);
    if (!json_is_object(host)) return jx_fail(s, "host", "expected an object with mem_bytes, mem_bw_Bps, nvme_bw_Bps");
    st = hwj_check_keys(&hs, host, host_keys, AP_COUNT(host_keys));
    if (!st) st = hwj_positive(&hs, host, "mem_bytes", false, &g->host.mem_bytes, NULL);
    if (!st) st = hwj_positive(&hs, host, "mem_bw_Bps", false, &g->host.mem_bw_Bps, NULL);
    if (!st) st = hwj_positive(&hs, host, "nvme_bw_Bps", false, &g->host.nvme_bw_Bps, NULL);
    if (!st) st = hwj_check_meta(&hs, host);
    if (st) return st;
  }
  return derive_network(s, g);
}

/* ---- inter_node --------------------------------------------------------------------------------------- */

/* Applies "inter_node" to the outermost level of every group. NIC fields given without bw_Bps make the
 * per-device bandwidth be derived again from the NICs. */
static ap_status apply_inter_node(const jx_src *top, json_t *obj, hw_cluster *c) {
  char buf[64];
  jx_src s;
  hwj_child(top, "inter_node", -1, buf, sizeof buf, &s);
  if (!json_is_object(obj)) return jx_fail(top, "inter_node", "expected an object");
  hw_link_level ov = {0};
  char name[HW_NAME_MAX] = "";
  bool has_bw, has_lat, has_over, has_nics, has_nic_bw, has_per_nic;
  ap_status st = hwj_check_keys(&s, obj, inter_keys, AP_COUNT(inter_keys));
  if (!st) st = hwj_check_meta(&s, obj);
  if (!st) st = hwj_text(&s, obj, "name", false, name, sizeof name);
  if (!st) st = hwj_positive(&s, obj, "bw_Bps", false, &ov.bw_Bps, &has_bw);
  if (!st) st = hwj_nonnegative(&s, obj, "latency_s", false, &ov.latency_s, &has_lat);
  if (!st) st = jx_f64(&s, obj, "oversubscription", false, 1, 1e6, &ov.oversubscription, &has_over);
  if (!st) st = jx_i64(&s, obj, "nics_per_node", false, 1, HW_MAX_DEVICES, &ov.nics_per_node, &has_nics);
  if (!st) st = hwj_positive(&s, obj, "nic_bw_Bps", false, &ov.nic_bw_Bps, &has_nic_bw);
  if (!st) st = hwj_positive(&s, obj, "devices_per_nic", false, &ov.devices_per_nic, &has_per_nic);
  if (st) return st;
  for (int i = 0; i < c->n_groups && !st; i++) {
    hw_node_group *g = &c->groups[i];
    hw_link_level *net = &g->levels[g->n_levels - 1];
    if (*name) memcpy(net->name, name, sizeof name);
    if (has_lat) net->latency_s = ov.latency_s;
    if (has_over) net->oversubscription = ov.oversubscription;
    if (has_nics || has_nic_bw || has_per_nic) {
      if (has_nics) net->nics_per_node = ov.nics_per_node;
      if (has_nic_bw) net->nic_bw_Bps = ov.nic_bw_Bps;
      if (!has_bw && !(net->nic_bw_Bps > 0))
        return jx_fail(&s, "nic_bw_Bps", "required with NIC fields when bw_Bps is not given");
      net->devices_per_nic = has_per_nic ? ov.devices_per_nic : 0;
      net->bw_Bps = 0;
    }
    if (has_bw) net->bw_Bps = ov.bw_Bps;
    st = derive_network(&s, g);
  }
  return st;
}

/* ---- Whole-cluster checks ------------------------------------------------------------------------------ */

/* Spreads the devices of a group evenly over the fewest multi-node domains that hold them when the count
 * is not a whole number of domains and the even share is a whole number of nodes: 128 GB200 become two
 * NVL72 racks of 64, as a scheduler would place them, not 72 + 56. */
static void balance_domains(hw_node_group *g) {
  for (int l = 0; l + 1 < g->n_levels; l++) {
    int64_t d = g->levels[l].domain_devices, n = g->n_devices;
    if (d <= g->devices_per_node || n <= d || n % d == 0) continue;
    int64_t k = (n + d - 1) / d, share = n / k;
    if (n % k != 0 || share % g->devices_per_node != 0) continue;
    /* Keep the nesting: the levels inside must divide the new domain, and it must divide those outside. */
    bool nests = l == 0 || share % g->levels[l - 1].domain_devices == 0;
    for (int m = l + 1; m + 1 < g->n_levels; m++) nests = nests && g->levels[m].domain_devices % share == 0;
    if (nests) g->levels[l].domain_devices = share;
  }
}

static ap_status check_group(const jx_src *gs, hw_node_group *g) {
  int64_t dpn = g->devices_per_node;
  for (int l = 0; l + 1 < g->n_levels; l++) {
    char buf[192];
    jx_src ls;
    hwj_child(gs, "levels", l, buf, sizeof buf, &ls);
    int64_t d = g->levels[l].domain_devices;
    if (l > 0 && d % g->levels[l - 1].domain_devices != 0)
      return jx_fail(&ls, "domain_devices", "expected a multiple of the level inside it (%lld), got %lld",
                     (long long)g->levels[l - 1].domain_devices, (long long)d);
    if (d < dpn && dpn % d != 0)
      return jx_fail(&ls, "domain_devices",
                     "expected a divisor of devices_per_node (%lld) or a multiple of it, got %lld", (long long)dpn,
                     (long long)d);
    if (d > dpn && d % dpn != 0 && g->n_nodes > 1)
      return jx_fail(&ls, "domain_devices",
                     "expected a multiple of devices_per_node (%lld) for a domain spanning nodes, got %lld",
                     (long long)dpn, (long long)d);
    if (g->levels[l].topology == HW_TOPO_MESH && d > dpn)
      return jx_fail(&ls, "domain_devices", "expected at most devices_per_node (%lld) for a mesh, which joins the "
                     "devices of one node, got %lld", (long long)dpn, (long long)d);
  }
  return AP_OK;
}

static ap_status finish_cluster(const jx_src *top, bool grouped, hw_cluster *c) {
  int64_t total = 0, nodes = 0;
  for (int i = 0; i < c->n_groups; i++) {
    hw_node_group *g = &c->groups[i];
    char buf[64];
    jx_src gs = *top;
    if (grouped) hwj_child(top, "node_groups", i, buf, sizeof buf, &gs);
    if (g->n_levels != c->groups[0].n_levels)
      return jx_fail(&gs, "levels", "expected %d link levels like node_groups[0], got %d", c->groups[0].n_levels,
                     g->n_levels);
    if (g->n_nodes > HW_MAX_DEVICES / g->devices_per_node || total + g->n_nodes * g->devices_per_node > HW_MAX_DEVICES)
      return jx_fail(&gs, "n_nodes", "expected at most %lld devices in the cluster", (long long)HW_MAX_DEVICES);
    g->n_devices = g->n_nodes * g->devices_per_node;
    g->first_rank = total;
    total += g->n_devices;
    nodes += g->n_nodes;
    ap_status st = check_group(&gs, g);
    if (st) return st;
    balance_domains(g);
  }
  c->n_levels = c->groups[0].n_levels;
  c->n_devices = total;
  c->n_nodes = nodes;
  return AP_OK;
}

/* ---- Entry points ------------------------------------------------------------------------------------- */

/* The name of a cluster file without folders and ".json", in the arena. */
static char *stem_of(arena *a, const char *file) {
  const char *base = util_basename(file);
  size_t n = strlen(base);
  if (util_ends_with(base, ".json")) n -= 5;
  return arena_printf(a, "%.*s", (int)n, base);
}

static ap_status read_cluster(ap_ctx *ctx, const char *file, json_t *root, arena *a, hw_cluster *c) {
  jx_src top = {ctx, file, ""};
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: expected a JSON object at the top level", file);
  ap_status st = hwj_check_keys(&top, root, top_keys, AP_COUNT(top_keys));
  if (!st) st = hwj_check_meta(&top, root);
  const char *name = NULL, *desc = NULL, *unused = NULL;
  if (!st) st = jx_str(&top, root, "name", false, &name, NULL);
  if (!st) st = jx_str(&top, root, "description", false, &desc, NULL);
  if (!st) st = jx_str(&top, root, "origin", false, &unused, NULL);
  /* `clusters --show` tags its description (docs/json.md), which reads back as a cluster file. */
  const char *format = NULL;
  if (!st) st = jx_str(&top, root, "format", false, &format, NULL);
  if (!st && format && strcmp(format, "autopar-cluster/1") != 0)
    st = jx_fail(&top, "format", "expected \"autopar-cluster/1\", got \"%.64s\"", format);
  if (st) return st;
  if (name && (!*name || strlen(name) >= HW_NAME_MAX))
    return jx_fail(&top, "name", "expected 1 to %d characters", HW_NAME_MAX - 1);

  json_t *groups = json_object_get(root, "node_groups");
  bool grouped = groups && !json_is_null(groups);
  if (grouped) {
    for (size_t k = 0; k < AP_COUNT(node_keys); k++)
      if (json_object_get(root, node_keys[k]) && strcmp(node_keys[k], "sources") != 0)
        return jx_fail(&top, node_keys[k], "give either node_groups or one node type at the top level, not both");
    if (!json_is_array(groups) || json_array_size(groups) < 1 || json_array_size(groups) > HW_MAX_GROUPS)
      return jx_fail(&top, "node_groups", "expected an array of 1 to %d node groups", HW_MAX_GROUPS);
    c->n_groups = (int)json_array_size(groups);
  } else {
    c->n_groups = 1;
  }
  c->groups = arena_alloc(a, sizeof *c->groups * (size_t)c->n_groups);
  c->name = name ? arena_strdup(a, name) : stem_of(a, file);
  c->description = arena_strdup(a, desc ? desc : "");
  if (!c->groups || !c->name || !c->description) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);

  if (!grouped) st = read_node(&top, root, 0, &c->groups[0]);
  for (int i = 0; grouped && i < c->n_groups && !st; i++) {
    char buf[64];
    jx_src gs;
    hwj_child(&top, "node_groups", i, buf, sizeof buf, &gs);
    json_t *obj = json_array_get(groups, (size_t)i);
    if (!json_is_object(obj)) st = jx_fail(&gs, "", "expected a node group object");
    if (!st) st = hwj_check_keys(&gs, obj, node_keys, AP_COUNT(node_keys));
    if (!st) st = hwj_check_meta(&gs, obj);
    if (!st) st = read_node(&gs, obj, 0, &c->groups[i]);
  }
  if (st) return st;

  json_t *inter = json_object_get(root, "inter_node");
  if (inter && !json_is_null(inter)) st = apply_inter_node(&top, inter, c);
  if (!st) st = finish_cluster(&top, grouped, c);
  if (st) return st;

  int64_t n_devices = 0;
  bool has_n = false;
  st = jx_i64(&top, root, "n_devices", false, 1, INT64_MAX, &n_devices, &has_n);
  if (!st && has_n && n_devices != c->n_devices)
    st = jx_fail(&top, "n_devices", "expected %lld (the sum over the node groups), got %lld",
                 (long long)c->n_devices, (long long)n_devices);
  return st;
}

/* ---- The public handle: made here, freed here ---------------------------------------------------------- */

void ap_cluster_free(ap_cluster *cluster) {
  if (!cluster) return;
  arena_free(cluster->arena);
  free(cluster);
}

int64_t ap_cluster_n_devices(const ap_cluster *cluster) { return cluster ? cluster->c.n_devices : 0; }

const hw_cluster *hw_cluster_of(const ap_cluster *cluster) { return cluster ? &cluster->c : NULL; }

ap_status hw_cluster_from_json(ap_ctx *ctx, const char *file, json_t *root, const char *origin, ap_cluster **out) {
  *out = NULL;
  ap_cluster *cl = calloc(1, sizeof *cl);
  arena *a = arena_new();
  if (!cl || !a) {
    free(cl);
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  }
  cl->arena = a;
  ap_status st = read_cluster(ctx, file, root, a, &cl->c);
  if (!st) {
    cl->c.origin = arena_strdup(a, origin ? origin : file);
    if (!cl->c.origin) st = ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  }
  if (st) {
    ap_cluster_free(cl);
    return st;
  }
  *out = cl;
  return AP_OK;
}

ap_status hw_cluster_first_devices(ap_ctx *ctx, const ap_cluster *cluster, int64_t n, ap_cluster **out) {
  *out = NULL;
  const hw_cluster *c = &cluster->c;
  const hw_node_group *g0 = &c->groups[0];
  int64_t dpn = g0->devices_per_node;
  if (c->n_groups != 1 || n < 1 || n > c->n_devices || (n > dpn && n % dpn != 0))
    return ctx_fail(ctx, AP_INVALID,
                    "cluster %s: cannot take its first %lld of %lld devices (one node group, and up to one node or "
                    "whole nodes of %lld)",
                    c->name, (long long)n, (long long)c->n_devices, (long long)dpn);
  ap_cluster *cl = calloc(1, sizeof *cl);
  arena *a = arena_new();
  hw_node_group *g = a ? arena_alloc(a, sizeof *g) : NULL;
  if (!cl || !g) {
    free(cl);
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  cl->arena = a;
  *g = *g0;
  if (n < dpn) {
    rescale_node(g, n);
    g->n_nodes = 1;
  } else {
    g->n_nodes = n / dpn;
  }
  g->n_devices = n;
  g->first_rank = 0;
  cl->c = *c;
  cl->c.groups = g;
  cl->c.n_nodes = g->n_nodes;
  cl->c.n_devices = n;
  cl->c.name = arena_printf(a, "%s (%lld of its %lld devices)", c->name, (long long)n, (long long)c->n_devices);
  cl->c.description = arena_strdup(a, c->description ? c->description : "");
  cl->c.origin = arena_strdup(a, c->origin ? c->origin : "");
  if (!cl->c.name || !cl->c.description || !cl->c.origin) {
    ap_cluster_free(cl);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  *out = cl;
  return AP_OK;
}

ap_status hw_cluster_parse(ap_ctx *ctx, const char *file, const char *text, size_t n_bytes, ap_cluster **out) {
  if (!out) return ctx_fail(ctx, AP_INVALID, "hw_cluster_parse: out must not be NULL");
  *out = NULL;
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, file, text, n_bytes, &root);
  if (st) return st;
  st = hw_cluster_from_json(ctx, file, root, NULL, out);
  json_decref(root);
  return st;
}
