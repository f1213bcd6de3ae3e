/* Clusters as the rest of autopar sees them: loading from a spec (a preset, a shorthand or a file path),
 * the public handle, and the question the cost model asks of the link hierarchy, "which level does a
 * communication group cross, and what bandwidth does it get there" (hw_cluster_level_for_group).
 *
 * Shorthands: NAME is a cluster preset or a device (which stands for its default node preset); NAME alone is
 * the preset's node count (1 unless the preset says otherwise); NAME:N is N devices, a whole number of nodes
 * or fewer than one node (then one partial node); NAME:NxG is N nodes of G devices, G at most the preset's.
 * The handle itself is made and freed in cluster_json.c, which calls nothing here (one direction). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/hw_json.h"

/* ---- Loading ----------------------------------------------------------------------------------------------- */

static ap_status load_file(ap_ctx *ctx, const char *path, ap_cluster **out) {
  json_t *root = NULL;
  ap_status st = jx_load_file(ctx, path, &root);
  if (st) return st;
  st = hw_cluster_from_json(ctx, path, root, NULL, out);
  json_decref(root);
  return st;
}

/* Finds the cluster preset that NAME stands for: a cluster preset, or the default node of a device. */
static ap_status resolve_preset(ap_ctx *ctx, const char *spec, const char *name, const embedded_file **out) {
  *out = hw_preset_find(HW_PRESET_CLUSTER, name);
  if (*out) return AP_OK;
  if (hw_preset_find(HW_PRESET_DEVICE, name)) {
    hw_device dev;
    ap_status st = hw_device_find(ctx, name, &dev);
    if (st) return st;
    if (!dev.default_node[0])
      return ctx_fail(ctx, AP_NOTFOUND, "%s: device %s names no default node preset; use a cluster file", spec,
                      dev.name);
    *out = hw_preset_find(HW_PRESET_CLUSTER, dev.default_node);
    if (!*out)
      return ctx_fail(ctx, AP_INTERNAL, "%s: device %s names node preset %s, which does not exist", spec, dev.name,
                      dev.default_node);
    return AP_OK;
  }
  char hint[256];
  hw_preset_suggest(name, true, true, hint, sizeof hint);
  if (*hint)
    return ctx_fail(ctx, AP_NOTFOUND, "unknown cluster or device '%s' (did you mean %s?)", name, hint);
  return ctx_fail(ctx, AP_NOTFOUND, "unknown cluster or device '%s' (`autopar clusters` lists them)", name);
}

ap_status hw_shorthand_count(ap_ctx *ctx, const char *spec, const char *count, const char *preset, int64_t dpn,
                             int64_t *n_nodes, int64_t *devices_per_node) {
  const char *x = strpbrk(count, "xX*");
  if (x) {
    char left[32];
    size_t n = (size_t)(x - count);
    int64_t nodes = 0, per = 0;
    if (n >= sizeof left || (memcpy(left, count, n), left[n] = '\0', !util_parse_i64(left, &nodes)) ||
        !util_parse_i64(x + 1, &per))
      return ctx_fail(ctx, AP_INVALID, "%s: expected NODESxDEVICES with two positive integers, as in %s:8x8", spec,
                      preset);
    if (nodes > HW_MAX_DEVICES)
      return ctx_fail(ctx, AP_INVALID, "%s: expected at most %lld devices", spec, (long long)HW_MAX_DEVICES);
    if (per > dpn)
      return ctx_fail(ctx, AP_INVALID, "%s: %lld devices per node is more than a %s node holds (%lld)", spec,
                      (long long)per, preset, (long long)dpn);
    *n_nodes = nodes;
    *devices_per_node = per;
  } else {
    int64_t devices = 0;
    if (!util_parse_i64(count, &devices))
      return ctx_fail(ctx, AP_INVALID, "%s: expected a device count (as in %s:64) or NODESxDEVICES (as in %s:8x%lld)",
                      spec, preset, preset, (long long)dpn);
    /* Range first, so that the suggestions below (below + dpn) cannot overflow. */
    if (devices > HW_MAX_DEVICES)
      return ctx_fail(ctx, AP_INVALID, "%s: expected at most %lld devices", spec, (long long)HW_MAX_DEVICES);
    if (devices < dpn) {
      *n_nodes = 1;
      *devices_per_node = devices;
    } else if (devices % dpn != 0) {
      int64_t below = devices / dpn * dpn;
      return ctx_fail(ctx, AP_INVALID,
                      "%s: %lld devices is not a whole number of %s nodes of %lld; use %lld or %lld, or NODESxDEVICES",
                      spec, (long long)devices, preset, (long long)dpn, (long long)below, (long long)(below + dpn));
    } else {
      *n_nodes = devices / dpn;
      *devices_per_node = dpn;
    }
  }
  if (*n_nodes > HW_MAX_DEVICES / *devices_per_node)
    return ctx_fail(ctx, AP_INVALID, "%s: expected at most %lld devices", spec, (long long)HW_MAX_DEVICES);
  return AP_OK;
}

static ap_status load_shorthand(ap_ctx *ctx, const char *spec, ap_cluster **out) {
  char name[HW_NAME_MAX];
  const char *colon = strchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  if (n == 0 || n >= sizeof name)
    return ctx_fail(ctx, AP_INVALID, "%.80s: expected a preset or device name of 1 to %d characters", spec,
                    HW_NAME_MAX - 1);
  memcpy(name, spec, n);
  name[n] = '\0';
  const embedded_file *f = NULL;
  ap_status st = resolve_preset(ctx, spec, name, &f);
  if (st) return st;

  /* The preset itself, for its node size, node count and description. */
  ap_cluster *tmpl = NULL;
  st = hw_cluster_parse(ctx, f->path, f->text, f->n_bytes, &tmpl);
  if (st) return st;
  const hw_node_group *g0 = &tmpl->c.groups[0];
  int64_t n_nodes = g0->n_nodes, dpn = g0->devices_per_node;
  if (colon) st = hw_shorthand_count(ctx, spec, colon + 1, tmpl->c.name, g0->devices_per_node, &n_nodes, &dpn);
  json_t *root = st ? NULL
                    : json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", tmpl->c.name, "description", tmpl->c.description,
                                "node", tmpl->c.name, "n_nodes", (json_int_t)n_nodes, "devices_per_node",
                                (json_int_t)dpn);
  char *origin = st ? NULL : arena_printf(tmpl->arena, "%s (%s)", spec, f->path);
  if (!st && (!root || !origin)) st = ctx_fail(ctx, AP_NOMEM, "%s: out of memory", spec);
  if (!st) st = hw_cluster_from_json(ctx, spec, root, origin, out);
  /* No count given: the node count of the preset (one node for every shipped one), said with the answer, as a
   * bare chip name could as well mean one device or a whole cluster. */
  if (!st && !colon) {
    bool device = !hw_preset_find(HW_PRESET_CLUSTER, name);
    (*out)->c.assumed = arena_printf((*out)->arena, "cluster %s names no device count: %lld node%s of %lld %s (%s %s); "
                                     "%s:N for N devices, %s:NxG for N nodes of G",
                                     spec, (long long)n_nodes, n_nodes == 1 ? "" : "s", (long long)dpn,
                                     g0->device.name, device ? "the default node of the device, preset" : "the preset",
                                     tmpl->c.name, name, name);
    if (!(*out)->c.assumed) {
      ap_cluster_free(*out);
      *out = NULL;
      st = ctx_fail(ctx, AP_NOMEM, "%s: out of memory", spec);
    }
  }
  json_decref(root);
  ap_cluster_free(tmpl);
  return st;
}

ap_status ap_cluster_load(ap_ctx *ctx, const char *spec, ap_cluster **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_cluster_load: ctx and out must not be NULL");
  *out = NULL;
  if (!spec || !*spec)
    return ctx_fail(ctx, AP_INVALID, "cluster: expected a preset (dgx-h100), a shorthand (h100:64, dgx-h100:8x8) "
                                     "or a path to a JSON file");
  if (util_ends_with(spec, ".json") || strchr(spec, '/')) return load_file(ctx, spec, out);
  return load_shorthand(ctx, spec, out);
}

/* ---- Rank geometry ----------------------------------------------------------------------------------------- */

/* The index of the node group holding rank (0 <= rank < n_devices): groups are sorted by first_rank. */
static int group_index(const hw_cluster *c, int64_t rank) {
  int lo = 0, hi = c->n_groups - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (c->groups[mid].first_rank <= rank) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

const hw_node_group *hw_cluster_group_of_rank(const hw_cluster *c, int64_t rank) {
  if (!c || rank < 0 || rank >= c->n_devices) return NULL;
  return &c->groups[group_index(c, rank)];
}

/* A run of contiguous ranks [lo, hi) inside node group `group`. */
typedef struct {
  int64_t lo, hi;
  int group;
} span;

/* The domain holding rank at `level`: the whole cluster at the outermost level, else a block of
 * domain_devices ranks inside the rank's node group (the last block of a group may be partial). A negative
 * level means the rank's node. */
static span domain_of(const hw_cluster *c, int level, int64_t rank) {
  span s;
  s.group = group_index(c, rank);
  const hw_node_group *g = &c->groups[s.group];
  if (level >= c->n_levels - 1) {
    s.lo = 0;
    s.hi = c->n_devices;
    return s;
  }
  int64_t d = level < 0 ? g->devices_per_node : g->levels[level].domain_devices;
  s.lo = g->first_rank + (rank - g->first_rank) / d * d;
  s.hi = s.lo + d < g->first_rank + g->n_devices ? s.lo + d : g->first_rank + g->n_devices;
  return s;
}

/* The most members of the group {first + k*stride : k < size} inside one domain of `level`, walking domain
 * by domain; marks the node groups it passes through in touched (may be NULL). */
static int64_t most_members_per_domain(const hw_cluster *c, int level, int64_t first, int64_t stride,
                                       int64_t size, bool *touched) {
  int64_t most = 0;
  for (int64_t k = 0; k < size;) {
    int64_t r = first + k * stride;
    span s = domain_of(c, level, r);
    int64_t count = (s.hi - 1 - r) / stride + 1;
    if (count > size - k) count = size - k;
    if (count > most) most = count;
    if (touched) touched[s.group] = true;
    k += count;
  }
  return most;
}

int64_t hw_cluster_fast_domain(const hw_cluster *c) {
  int64_t d = c->n_devices;
  for (int gi = 0; gi < c->n_groups; gi++) {
    const hw_node_group *g = &c->groups[gi];
    int64_t dom = g->n_levels > 1 ? g->levels[0].domain_devices : g->n_devices;
    if (dom > 0 && dom < d) d = dom;
  }
  return d;
}

int64_t hw_cluster_domain_first(const hw_cluster *c, int level, int64_t rank) { return domain_of(c, level, rank).lo; }

void hw_cluster_level_link(const hw_cluster *c, int level, const bool *touched, int64_t members, hw_group_link *out) {
  int last_level = c->n_levels - 1;
  out->level = level;
  out->level_name = NULL;
  out->bw_Bps = -1;
  out->latency_s = 0;
  out->devices_per_nic = 0;
  for (int gi = 0; gi < c->n_groups; gi++) {
    if (touched && !touched[gi]) continue;
    const hw_link_level *lv = &c->groups[gi].levels[level];
    double bw = lv->bw_Bps / lv->oversubscription;
    if (lv->topology == HW_TOPO_MESH) {
      /* A group of m devices in a mesh of d uses m-1 of each device's d-1 links. */
      int64_t d = lv->domain_devices, used = members - 1 < d - 1 ? members - 1 : d - 1;
      if (d > 2) bw = bw / (double)(d - 1) * (double)(used > 1 ? used : 1);
    }
    if (out->bw_Bps < 0 || bw < out->bw_Bps) {
      out->bw_Bps = bw;
      out->level_name = lv->name;
    }
    if (lv->latency_s > out->latency_s) out->latency_s = lv->latency_s;
    if (level == last_level && lv->devices_per_nic > out->devices_per_nic) out->devices_per_nic = lv->devices_per_nic;
  }
}

ap_status hw_cluster_level_for_group(ap_ctx *ctx, const hw_cluster *c, int64_t stride, int64_t size,
                                     hw_group_link *out) {
  memset(out, 0, sizeof *out);
  if (!c) return ctx_fail(ctx, AP_INVALID, "level_for_group: no cluster");
  if (stride < 1 || size < 1)
    return ctx_fail(ctx, AP_INVALID, "level_for_group: stride and size must be >= 1, got %lld and %lld",
                    (long long)stride, (long long)size);
  if (size > c->n_devices / stride)
    return ctx_fail(ctx, AP_INVALID, "level_for_group: %lld ranks %lld apart do not fit: the cluster %s has %lld devices",
                    (long long)size, (long long)stride, c->name, (long long)c->n_devices);
  int64_t block = stride * size, n_blocks = c->n_devices / block;
  int last_level = c->n_levels - 1, level = 0;

  /* Pass 1: the innermost level whose domains hold every group whole. Domains are runs of contiguous
   * ranks, so a group lies in one domain exactly when its first and last members do. */
  for (int64_t b = 0; b < n_blocks; b++) {
    for (int64_t i = 0; i < stride; i++) {
      int64_t first = b * block + i, last = first + (size - 1) * stride;
      while (level < last_level && domain_of(c, level, first).hi <= last) level++;
    }
  }

  /* Pass 2: how the groups sit in the domains below that level and in nodes, and which node groups they
   * touch (only the outermost level can reach more than one). */
  bool touched[HW_MAX_GROUPS] = {false};
  int64_t per_inner = 0, per_node = 0;
  for (int64_t b = 0; b < n_blocks; b++) {
    for (int64_t i = 0; i < stride; i++) {
      int64_t first = b * block + i, m;
      m = level == 0 ? size : most_members_per_domain(c, level - 1, first, stride, size, touched);
      if (level == 0) touched[group_index(c, first)] = true;
      if (m > per_inner) per_inner = m;
      m = most_members_per_domain(c, -1, first, stride, size, NULL);
      if (m > per_node) per_node = m;
    }
  }

  out->n_groups = n_blocks * stride;
  out->members_per_inner_domain = per_inner;
  out->members_per_node = per_node;
  hw_cluster_level_link(c, level, touched, size, out);
  return AP_OK;
}
