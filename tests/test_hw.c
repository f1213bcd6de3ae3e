/* Tests of the hw module: every preset loads and describes itself back, every number in the data files has
 * a source, the device names of the reference runs resolve, shorthands, the link level a communication
 * group crosses, heterogeneous clusters, and bad input (status and message). Table-driven: one line per
 * case. */
#include <stdlib.h>

#include "testutil.h"

#include "core/jsonx.h"
#include "hw/hw.h"

/* Fails with both strings when needle is not in haystack (for strings other than the context's error). */
#define assert_contains(haystack, needle)                                                           \
  do {                                                                                              \
    const char *h_ = (haystack), *n_ = (needle);                                                    \
    if (!strstr(h_, n_)) fail_msg("expected \"%s\" to contain \"%s\"", h_, n_);                     \
  } while (0)

static int setup_ctx(void **state) {
  *state = ap_ctx_new();
  return *state ? 0 : -1;
}

static int teardown_ctx(void **state) {
  ap_ctx_free(*state);
  return 0;
}

static const char *const runs_csv_devices[] = {"a100-40gb", "a100-80gb", "h100-sxm", "h100-96gb", "h800",
                                               "h200",      "b200",      "gb200",    "gb300"};

/* ---- Presets --------------------------------------------------------------------------------------------- */

/* Loads spec, describes it, parses the description and describes that: both descriptions must agree. */
static void check_round_trip(ap_ctx *ctx, const char *spec) {
  ap_cluster *a = NULL, *b = NULL;
  char *ja = NULL, *jb = NULL;
  ap_status st = ap_cluster_load(ctx, spec, &a);
  if (st) fail_msg("%s: %s", spec, ap_ctx_error(ctx));
  assert_int_equal(ap_cluster_describe_json(ctx, a, &ja), AP_OK);
  st = hw_cluster_parse(ctx, "described.json", ja, strlen(ja), &b);
  if (st) fail_msg("%s: the description does not load back: %s\n%s", spec, ap_ctx_error(ctx), ja);
  assert_int_equal(ap_cluster_describe_json(ctx, b, &jb), AP_OK);
  /* The origin differs (a spec, then a file name); everything after it must be the same. */
  const char *ta = strstr(ja, "\"n_devices\""), *tb = strstr(jb, "\"n_devices\"");
  assert_non_null(ta);
  assert_non_null(tb);
  assert_string_equal(ta, tb);
  assert_int_equal(ap_cluster_n_devices(a), ap_cluster_n_devices(b));
  ap_free(ja);
  ap_free(jb);
  ap_cluster_free(a);
  ap_cluster_free(b);
}

static void test_every_cluster_preset_loads(void **state) {
  ap_ctx *ctx = *state;
  size_t n = 0, count = 0;
  const embedded_file *files = embedded_files(&n);
  for (size_t i = 0; i < n; i++) {
    if (strncmp(files[i].path, "data/clusters/", 14) != 0) continue;
    ap_cluster *cl = NULL;
    ap_status st = hw_cluster_parse(ctx, files[i].path, files[i].text, files[i].n_bytes, &cl);
    if (st) fail_msg("%s: %s", files[i].path, ap_ctx_error(ctx));
    const hw_cluster *c = hw_cluster_of(cl);
    assert_int_equal(c->n_groups, 1);
    assert_true(c->n_levels >= 2);
    assert_int_equal(c->n_devices, c->groups[0].devices_per_node * c->groups[0].n_nodes);
    /* The file is named after the preset, and loading by name gives the same cluster. */
    char expect[128];
    snprintf(expect, sizeof expect, "data/clusters/%s.json", c->name);
    assert_string_equal(files[i].path, expect);
    check_round_trip(ctx, c->name);
    ap_cluster_free(cl);
    count++;
  }
  assert_true(count >= 10);
}

static void test_every_device_preset_parses(void **state) {
  ap_ctx *ctx = *state;
  size_t n = 0, count = 0;
  const embedded_file *files = embedded_files(&n);
  for (size_t i = 0; i < n; i++) {
    if (strncmp(files[i].path, "data/devices/", 13) != 0) continue;
    hw_device d;
    ap_status st = hw_device_parse(ctx, files[i].path, files[i].text, files[i].n_bytes, &d);
    if (st) fail_msg("%s: %s", files[i].path, ap_ctx_error(ctx));
    assert_true(d.peak_flop_per_s[HW_DTYPE_BF16] > 0);
    assert_true(d.mem_bytes > 0);
    assert_true(d.mem_bw_Bps > 0);
    /* Every device names a default node preset that exists and uses this very device. */
    ap_cluster *cl = NULL;
    char spec[96];
    snprintf(spec, sizeof spec, "%s:1", d.name);
    if (ap_cluster_load(ctx, spec, &cl)) fail_msg("%s: %s", spec, ap_ctx_error(ctx));
    assert_string_equal(hw_cluster_of(cl)->groups[0].device.name, d.name);
    assert_string_equal(hw_cluster_of(cl)->name, d.default_node);
    ap_cluster_free(cl);
    count++;
  }
  assert_true(count >= 10);
}

/* True when src (the "sources" object next to a number) explains key, or key.child for every child. */
static bool has_source(json_t *sources, const char *key, json_t *value) {
  if (json_is_string(json_object_get(sources, key))) return true;
  if (!json_is_object(value)) return false;
  const char *child;
  json_t *v;
  json_object_foreach(value, child, v) {
    char path[128];
    snprintf(path, sizeof path, "%s.%s", key, child);
    if (!json_is_string(json_object_get(sources, path))) return false;
  }
  return true;
}

/* Every number in obj, at any depth, has a source string next to it. */
static void check_sources(const char *file, json_t *obj) {
  if (json_is_array(obj)) {
    size_t i;
    json_t *v;
    json_array_foreach(obj, i, v) check_sources(file, v);
    return;
  }
  if (!json_is_object(obj)) return;
  json_t *sources = json_object_get(obj, "sources");
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (strcmp(key, "sources") == 0) continue;
    bool numeric_object = json_is_object(v) && !json_object_get(v, "sources");
    if (json_is_number(v) || numeric_object) {
      if (!has_source(sources, key, v)) fail_msg("%s: %s has no entry in the \"sources\" next to it", file, key);
    } else {
      check_sources(file, v);
    }
  }
}

static void test_every_number_has_a_source(void **state) {
  (void)state;
  size_t n = 0;
  const embedded_file *files = embedded_files(&n);
  for (size_t i = 0; i < n; i++) {
    if (strncmp(files[i].path, "data/devices/", 13) != 0 && strncmp(files[i].path, "data/clusters/", 14) != 0)
      continue;
    json_t *root = json_loadb(files[i].text, files[i].n_bytes, 0, NULL);
    assert_non_null(root);
    check_sources(files[i].path, root);
    json_decref(root);
  }
}

static void test_names_are_unique(void **state) {
  (void)state;
  /* Within a kind, no name or alias may appear twice, or lookups would depend on file order. */
  const char *dirs[] = {"data/devices/", "data/clusters/"};
  for (size_t k = 0; k < 2; k++) {
    const char *seen[256];
    size_t n_seen = 0, n = 0;
    json_t *roots[64];
    size_t n_roots = 0;
    const embedded_file *files = embedded_files(&n);
    for (size_t i = 0; i < n; i++) {
      if (strncmp(files[i].path, dirs[k], strlen(dirs[k])) != 0) continue;
      json_t *root = json_loadb(files[i].text, files[i].n_bytes, 0, NULL);
      assert_non_null(root);
      roots[n_roots++] = root;
      const char *names[16];
      size_t n_names = 0;
      names[n_names++] = json_string_value(json_object_get(root, "name"));
      size_t j;
      json_t *a;
      json_array_foreach(json_object_get(root, "aliases"), j, a) names[n_names++] = json_string_value(a);
      for (size_t m = 0; m < n_names; m++) {
        for (size_t s = 0; s < n_seen; s++)
          if (strcmp(seen[s], names[m]) == 0) fail_msg("%s: name %s used twice", dirs[k], names[m]);
        seen[n_seen++] = names[m];
      }
    }
    for (size_t i = 0; i < n_roots; i++) json_decref(roots[i]);
  }
}

/* ---- Devices ---------------------------------------------------------------------------------------------- */

static void test_runs_csv_device_names_resolve(void **state) {
  ap_ctx *ctx = *state;
  for (size_t i = 0; i < sizeof runs_csv_devices / sizeof *runs_csv_devices; i++) {
    hw_device d;
    if (hw_device_find(ctx, runs_csv_devices[i], &d)) fail_msg("%s: %s", runs_csv_devices[i], ap_ctx_error(ctx));
    assert_string_equal(d.name, runs_csv_devices[i]);
  }
}

static const struct {
  const char *name, *expect;
  ap_status status;
  const char *message;
} device_cases[] = {
    {"h100", "h100-sxm", AP_OK, ""},
    {"H100-SXM", "h100-sxm", AP_OK, ""},
    {"a100", "a100-80gb", AP_OK, ""},
    {"mi300x", "mi300x", AP_OK, ""},
    {"gb300", "gb300", AP_OK, ""},
    {"h1000", "", AP_NOTFOUND, "unknown device 'h1000' (did you mean h100"},
    {"tpu-v5", "", AP_NOTFOUND, "unknown device 'tpu-v5'"},
};

static void test_device_lookup(void **state) {
  ap_ctx *ctx = *state;
  for (size_t i = 0; i < sizeof device_cases / sizeof *device_cases; i++) {
    hw_device d;
    ap_status st = hw_device_find(ctx, device_cases[i].name, &d);
    if (st != device_cases[i].status)
      fail_msg("%s: status %s, expected %s (%s)", device_cases[i].name, ap_status_str(st),
               ap_status_str(device_cases[i].status), ap_ctx_error(ctx));
    if (st == AP_OK) assert_string_equal(d.name, device_cases[i].expect);
    else assert_error_contains(ctx, device_cases[i].message);
  }
}

static void test_dtype_table(void **state) {
  (void)state;
  for (int t = 0; t < HW_DTYPE_COUNT; t++) {
    hw_dtype back;
    assert_true(hw_dtype_from_name(hw_dtype_name((hw_dtype)t), &back));
    assert_int_equal(back, t);
  }
  hw_dtype d;
  assert_true(hw_dtype_from_name("BF16", &d));
  assert_int_equal(d, HW_DTYPE_BF16);
  assert_false(hw_dtype_from_name("fp64", &d));
  assert_string_equal(hw_dtype_name(HW_DTYPE_COUNT), "?");
  hw_topology t;
  assert_true(hw_topology_from_name("mesh", &t));
  assert_int_equal(t, HW_TOPO_MESH);
  assert_string_equal(hw_topology_name(HW_TOPO_SWITCH), "switch");
}

/* ---- Shorthands ------------------------------------------------------------------------------------------- */

static const struct {
  const char *spec;
  ap_status status;
  int64_t n_devices, n_nodes, devices_per_node, domain0; /* when AP_OK */
  const char *name_or_message;                         /* cluster name, or a piece of the error */
} shorthand_cases[] = {
    {"h100:64", AP_OK, 64, 8, 8, 8, "dgx-h100"},
    {"dgx-h100:8x8", AP_OK, 64, 8, 8, 8, "dgx-h100"},
    {"dgx-h100", AP_OK, 8, 1, 8, 8, "dgx-h100"},
    {"hgx-h100", AP_OK, 8, 1, 8, 8, "dgx-h100"},
    {"dgx-h100:16", AP_OK, 16, 2, 8, 8, "dgx-h100"},
    {"H100:8", AP_OK, 8, 1, 8, 8, "dgx-h100"},
    {"h100:4", AP_OK, 4, 1, 4, 4, "dgx-h100"},
    {"dgx-h100:2x4", AP_OK, 8, 2, 4, 4, "dgx-h100"},
    {"h100:1k", AP_OK, 1000, 125, 8, 8, "dgx-h100"},
    {"a100:16", AP_OK, 16, 2, 8, 8, "dgx-a100-80gb"},
    {"a100-40gb:128", AP_OK, 128, 16, 8, 8, "dgx-a100-40gb"},
    {"h100-96gb:256", AP_OK, 256, 32, 8, 8, "meta-h100-96gb"},
    {"h800:16", AP_OK, 16, 2, 8, 8, "hgx-h800"},
    {"h200:8", AP_OK, 8, 1, 8, 8, "hgx-h200"},
    {"b200:64", AP_OK, 64, 8, 8, 8, "dgx-b200"},
    {"gb200:72", AP_OK, 72, 18, 4, 72, "gb200-nvl72"},
    {"gb200:128", AP_OK, 128, 32, 4, 64, "gb200-nvl72"},
    {"gb200:256", AP_OK, 256, 64, 4, 64, "gb200-nvl72"},
    {"gb200:144", AP_OK, 144, 36, 4, 72, "gb200-nvl72"},
    {"gb200:8", AP_OK, 8, 2, 4, 72, "gb200-nvl72"},
    {"gb200-nvl72:18x4", AP_OK, 72, 18, 4, 72, "gb200-nvl72"},
    {"nvl72:36x2", AP_OK, 72, 36, 2, 36, "gb200-nvl72"},
    {"gb300:576", AP_OK, 576, 144, 4, 72, "gb300-nvl72"},
    {"mi300x:16", AP_OK, 16, 2, 8, 8, "mi300x"},
    {"h100:12", AP_INVALID, 0, 0, 0, 0, "h100:12: 12 devices is not a whole number of dgx-h100 nodes of 8; use 8 or 16"},
    {"dgx-h100:8x16", AP_INVALID, 0, 0, 0, 0, "16 devices per node is more than a dgx-h100 node holds (8)"},
    {"dgx-h100:0", AP_INVALID, 0, 0, 0, 0, "expected a device count"},
    {"dgx-h100:-8", AP_INVALID, 0, 0, 0, 0, "expected a device count"},
    {"dgx-h100:", AP_INVALID, 0, 0, 0, 0, "expected a device count"},
    {"dgx-h100:8x", AP_INVALID, 0, 0, 0, 0, "expected NODESxDEVICES"},
    {"dgx-h100:x8", AP_INVALID, 0, 0, 0, 0, "expected NODESxDEVICES"},
    {"h100:800000000", AP_INVALID, 0, 0, 0, 0, "expected at most"},
    /* Read values are range-checked before any arithmetic: these overflowed (the suggestion below + dpn) or
     * printed a wrapped "use … or -9223372036854775808" before. */
    {"h100:9223372036854775807", AP_INVALID, 0, 0, 0, 0, "h100:9223372036854775807: expected at most 4194304 devices"},
    {"h100:9223372036854775801", AP_INVALID, 0, 0, 0, 0, "expected at most 4194304 devices"},
    {"h100:9223372036854775807x8", AP_INVALID, 0, 0, 0, 0, "expected at most 4194304 devices"},
    {":8", AP_INVALID, 0, 0, 0, 0, "expected a preset or device name"},
    {"", AP_INVALID, 0, 0, 0, 0, "expected a preset"},
    {"dgx-h10", AP_NOTFOUND, 0, 0, 0, 0, "unknown cluster or device 'dgx-h10' (did you mean dgx-h100"},
    {"a10:8", AP_NOTFOUND, 0, 0, 0, 0, "(did you mean a100"},
    {"no/such/cluster.json", AP_IO, 0, 0, 0, 0, "no/such/cluster.json: cannot open"},
};

static void test_shorthands(void **state) {
  ap_ctx *ctx = *state;
  for (size_t i = 0; i < sizeof shorthand_cases / sizeof *shorthand_cases; i++) {
    ap_cluster *cl = (ap_cluster *)&cl; /* not NULL, so that the test sees *out being reset */
    ap_status st = ap_cluster_load(ctx, shorthand_cases[i].spec, &cl);
    if (st != shorthand_cases[i].status)
      fail_msg("'%s': status %s, expected %s (%s)", shorthand_cases[i].spec, ap_status_str(st),
               ap_status_str(shorthand_cases[i].status), ap_ctx_error(ctx));
    if (st) {
      assert_null(cl);
      assert_error_contains(ctx, shorthand_cases[i].name_or_message);
      assert_null(strchr(ap_ctx_error(ctx), '\n'));
      continue;
    }
    const hw_cluster *c = hw_cluster_of(cl);
    assert_string_equal(c->name, shorthand_cases[i].name_or_message);
    assert_int_equal(ap_cluster_n_devices(cl), shorthand_cases[i].n_devices);
    assert_int_equal(c->n_nodes, shorthand_cases[i].n_nodes);
    assert_int_equal(c->groups[0].devices_per_node, shorthand_cases[i].devices_per_node);
    assert_int_equal(c->groups[0].levels[0].domain_devices, shorthand_cases[i].domain0);
    assert_contains(c->origin, shorthand_cases[i].spec);
    ap_cluster_free(cl);
  }
}

/* The device of every row of the reference runs resolves, and "gpu:num_gpus" loads, when the reference data
 * is at hand (it sits beside the repository). */
static void test_runs_csv_rows_load(void **state) {
  ap_ctx *ctx = *state;
  const char *dir = test_reference_dir();
  if (!dir) skip();
  char path[512];
  snprintf(path, sizeof path, "%s/runs.csv", dir);
  FILE *f = fopen(path, "r");
  if (!f) skip();
  char line[16384];
  int gpu_col = -1, n_col = -1, rows = 0;
  while (fgets(line, sizeof line, f)) {
    /* Split on commas outside double quotes. */
    char *fields[64];
    int n_fields = 0;
    bool quoted = false;
    fields[n_fields++] = line;
    for (char *p = line; *p && n_fields < 64; p++) {
      if (*p == '"') quoted = !quoted;
      else if (*p == ',' && !quoted) *p = '\0', fields[n_fields++] = p + 1;
      else if (*p == '\n' && !quoted) *p = '\0';
    }
    if (gpu_col < 0) {
      for (int k = 0; k < n_fields; k++) {
        if (strcmp(fields[k], "gpu") == 0) gpu_col = k;
        if (strcmp(fields[k], "num_gpus") == 0) n_col = k;
      }
      assert_true(gpu_col >= 0 && n_col >= 0);
      continue;
    }
    if (n_fields <= n_col || n_fields <= gpu_col) continue; /* a line of a multi-line quoted field */
    char spec[96];
    snprintf(spec, sizeof spec, "%s:%s", fields[gpu_col], fields[n_col]);
    ap_cluster *cl = NULL;
    if (ap_cluster_load(ctx, spec, &cl)) {
      fclose(f);
      fail_msg("runs.csv: %s: %s", spec, ap_ctx_error(ctx));
    }
    assert_int_equal(ap_cluster_n_devices(cl), strtoll(fields[n_col], NULL, 10));
    ap_cluster_free(cl);
    rows++;
  }
  fclose(f);
  assert_true(rows > 0);
}

/* ---- Link levels of communication groups ------------------------------------------------------------------ */

static const struct {
  const char *spec;
  int64_t stride, size;
  ap_status status;
  int level;
  const char *level_name;
  int64_t per_inner, per_node, n_groups;
  double bw_Bps;
} group_cases[] = {
    /* tp=8 inside 8-GPU nodes stays on NVLink; dp across the same nodes crosses the network. */
    {"h100:64", 1, 8, AP_OK, 0, "nvlink", 8, 8, 8, 450e9},
    {"h100:64", 8, 8, AP_OK, 1, "network", 1, 1, 8, 50e9},
    {"h100:64", 1, 16, AP_OK, 1, "network", 8, 8, 4, 50e9},
    {"h100:64", 2, 4, AP_OK, 0, "nvlink", 4, 4, 16, 450e9},
    {"h100:64", 4, 4, AP_OK, 1, "network", 2, 2, 16, 50e9},
    {"h100:64", 3, 2, AP_OK, 1, "network", 2, 2, 30, 50e9},
    {"h100:64", 1, 1, AP_OK, 0, "nvlink", 1, 1, 64, 450e9},
    {"h100:64", 1, 64, AP_OK, 1, "network", 8, 8, 1, 50e9},
    /* A whole NVL72 rack is one NVLink domain; two racks are not. */
    {"gb200:144", 1, 72, AP_OK, 0, "nvlink", 72, 4, 2, 900e9},
    {"gb200:144", 1, 144, AP_OK, 1, "network", 72, 4, 1, 50e9},
    {"gb200:144", 72, 2, AP_OK, 1, "network", 1, 1, 72, 50e9},
    {"gb200:144", 4, 18, AP_OK, 0, "nvlink", 18, 1, 2 * 4, 900e9},
    {"gb200:128", 1, 64, AP_OK, 0, "nvlink", 64, 4, 2, 900e9},
    {"gb300:72", 1, 72, AP_OK, 0, "nvlink", 72, 4, 1, 900e9},
    /* A mesh gives a pair one link of 64 GB/s and a full board all seven. */
    {"mi300x:16", 1, 2, AP_OK, 0, "xgmi", 2, 2, 8, 64e9},
    {"mi300x:16", 1, 8, AP_OK, 0, "xgmi", 8, 8, 2, 448e9},
    {"mi300x:16", 8, 2, AP_OK, 1, "network", 1, 1, 8, 50e9},
    {"mi300x:4", 1, 4, AP_OK, 0, "xgmi", 4, 4, 1, 192e9},
    {"dgx-h100:2x4", 1, 8, AP_OK, 1, "network", 4, 4, 1, 50e9},
    {"h800:16", 1, 8, AP_OK, 0, "nvlink", 8, 8, 2, 200e9},
    {"a100:16", 8, 2, AP_OK, 1, "network", 1, 1, 8, 25e9},
    {"h100:64", 0, 8, AP_INVALID, 0, "stride and size must be >= 1", 0, 0, 0, 0},
    {"h100:64", 1, -2, AP_INVALID, 0, "stride and size must be >= 1", 0, 0, 0, 0},
    {"h100:64", 1, 65, AP_INVALID, 0, "the cluster dgx-h100 has 64", 0, 0, 0, 0},
    {"h100:64", INT64_MAX / 2, 4, AP_INVALID, 0, "the cluster dgx-h100 has 64", 0, 0, 0, 0},
};

static void test_level_for_group(void **state) {
  ap_ctx *ctx = *state;
  for (size_t i = 0; i < sizeof group_cases / sizeof *group_cases; i++) {
    ap_cluster *cl = NULL;
    if (ap_cluster_load(ctx, group_cases[i].spec, &cl)) fail_msg("%s: %s", group_cases[i].spec, ap_ctx_error(ctx));
    hw_group_link gl;
    ap_status st = hw_cluster_level_for_group(ctx, hw_cluster_of(cl), group_cases[i].stride, group_cases[i].size, &gl);
    if (st != group_cases[i].status)
      fail_msg("case %zu (%s stride %lld size %lld): status %s, expected %s (%s)", i, group_cases[i].spec,
               (long long)group_cases[i].stride, (long long)group_cases[i].size, ap_status_str(st),
               ap_status_str(group_cases[i].status), ap_ctx_error(ctx));
    if (st) {
      assert_error_contains(ctx, group_cases[i].level_name);
    } else {
      if (gl.level != group_cases[i].level || strcmp(gl.level_name, group_cases[i].level_name) != 0 ||
          gl.members_per_inner_domain != group_cases[i].per_inner || gl.members_per_node != group_cases[i].per_node ||
          gl.n_groups != group_cases[i].n_groups || gl.bw_Bps != group_cases[i].bw_Bps)
        fail_msg("case %zu (%s stride %lld size %lld): got level %d %s, %lld per inner domain, %lld per node, %lld "
                 "groups, %g B/s; expected level %d %s, %lld, %lld, %lld, %g",
                 i, group_cases[i].spec, (long long)group_cases[i].stride, (long long)group_cases[i].size, gl.level,
                 gl.level_name, (long long)gl.members_per_inner_domain, (long long)gl.members_per_node,
                 (long long)gl.n_groups, gl.bw_Bps, group_cases[i].level, group_cases[i].level_name,
                 (long long)group_cases[i].per_inner, (long long)group_cases[i].per_node,
                 (long long)group_cases[i].n_groups, group_cases[i].bw_Bps);
      assert_true(gl.latency_s > 0);
      if (gl.level == hw_cluster_of(cl)->n_levels - 1) assert_true(gl.devices_per_nic > 0);
      else assert_true(gl.devices_per_nic == 0);
    }
    ap_cluster_free(cl);
  }
}

/* Checks the answer against a brute force over every rank, on every preset and a range of shapes. */
static void test_level_for_group_matches_brute_force(void **state) {
  ap_ctx *ctx = *state;
  const char *specs[] = {"h100:32", "gb200:128", "gb200:152", "mi300x:24", "dgx-h100:3x4"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    ap_cluster *cl = NULL;
    if (ap_cluster_load(ctx, specs[s], &cl)) fail_msg("%s: %s", specs[s], ap_ctx_error(ctx));
    const hw_cluster *c = hw_cluster_of(cl);
    for (int64_t stride = 1; stride <= c->n_devices; stride++) {
      for (int64_t size = 1; size * stride <= c->n_devices; size++) {
        hw_group_link gl;
        assert_int_equal(hw_cluster_level_for_group(ctx, c, stride, size, &gl), AP_OK);
        /* Brute force: the level is the smallest l such that every member's level-l domain (its rank divided
         * by the domain size, in a cluster of one node group) is the first member's. */
        int expect = 0;
        int64_t blocks = c->n_devices / (stride * size);
        for (int64_t b = 0; b < blocks; b++) {
          for (int64_t i = 0; i < stride; i++) {
            int64_t first = b * stride * size + i;
            for (int64_t k = 0; k < size; k++) {
              int64_t r = first + k * stride;
              while (expect < c->n_levels - 1 &&
                     r / c->groups[0].levels[expect].domain_devices != first / c->groups[0].levels[expect].domain_devices)
                expect++;
            }
          }
        }
        if (gl.level != expect)
          fail_msg("%s stride %lld size %lld: level %d, brute force %d", specs[s], (long long)stride,
                   (long long)size, gl.level, expect);
      }
    }
    ap_cluster_free(cl);
  }
}

/* ---- Cluster files ------------------------------------------------------------------------------------------ */

static const char mixed_json[] =
    "{\"name\": \"mixed\", \"description\": \"A100 and H100 nodes on one fabric\",\n"
    " \"node_groups\": [{\"node\": \"dgx-a100-80gb\", \"n_nodes\": 4},\n"
    "                  {\"node\": \"dgx-h100\", \"n_nodes\": 2}],\n"
    " \"inter_node\": {\"oversubscription\": 2, \"latency_s\": 12e-6}}\n";

static void test_heterogeneous_cluster(void **state) {
  ap_ctx *ctx = *state;
  ap_cluster *cl = NULL;
  if (hw_cluster_parse(ctx, "mixed.json", mixed_json, strlen(mixed_json), &cl)) fail_msg("%s", ap_ctx_error(ctx));
  const hw_cluster *c = hw_cluster_of(cl);
  assert_string_equal(c->name, "mixed");
  assert_int_equal(c->n_groups, 2);
  assert_int_equal(c->n_devices, 48);
  assert_int_equal(c->n_nodes, 6);
  assert_int_equal(c->groups[1].first_rank, 32);
  assert_string_equal(hw_cluster_group_of_rank(c, 31)->device.name, "a100-80gb");
  assert_string_equal(hw_cluster_group_of_rank(c, 32)->device.name, "h100-sxm");
  assert_string_equal(hw_cluster_group_of_rank(c, 47)->device.name, "h100-sxm");
  assert_null(hw_cluster_group_of_rank(c, 48));
  assert_null(hw_cluster_group_of_rank(c, -1));

  hw_group_link gl;
  /* Within a node: the A100 groups set the pace at 300 GB/s. */
  assert_int_equal(hw_cluster_level_for_group(ctx, c, 1, 8, &gl), AP_OK);
  assert_int_equal(gl.level, 0);
  assert_true(gl.bw_Bps == 300e9);
  /* Across all 48: the A100 NICs (25 GB/s per GPU) halved by the oversubscription. */
  assert_int_equal(hw_cluster_level_for_group(ctx, c, 1, 48, &gl), AP_OK);
  assert_int_equal(gl.level, 1);
  assert_true(gl.bw_Bps == 12.5e9);
  assert_true(gl.latency_s == 12e-6);
  /* Groups of 16 ranks: two of them lie in the H100 nodes only, at 50 GB/s / 2 = 25 GB/s, but the worst
   * group is on the A100 nodes. */
  assert_int_equal(hw_cluster_level_for_group(ctx, c, 1, 16, &gl), AP_OK);
  assert_true(gl.bw_Bps == 12.5e9);

  char *json = NULL;
  assert_int_equal(ap_cluster_describe_json(ctx, cl, &json), AP_OK);
  ap_cluster *back = NULL;
  if (hw_cluster_parse(ctx, "back.json", json, strlen(json), &back)) fail_msg("%s\n%s", ap_ctx_error(ctx), json);
  assert_int_equal(ap_cluster_n_devices(back), 48);
  assert_true(hw_cluster_of(back)->groups[1].levels[1].oversubscription == 2);
  ap_free(json);
  ap_cluster_free(back);
  ap_cluster_free(cl);
}

static void test_cluster_file_from_disk(void **state) {
  ap_ctx *ctx = *state;
  char path[] = "/tmp/autopar_test_hw_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  fputs("{\"device\": {\"name\": \"toy\", \"peak_flop_per_s\": {\"bf16\": 1e14}, \"mem_bytes\": 17179869184,\n"
        "            \"mem_bw_Bps\": 1e12},\n"
        " \"devices_per_node\": 4, \"n_nodes\": 3,\n"
        " \"levels\": [{\"name\": \"pairs\", \"domain_devices\": 2, \"bw_Bps\": 32e9, \"latency_s\": 5e-6},\n"
        "            {\"name\": \"board\", \"domain_devices\": 4, \"bw_Bps\": 64e9, \"latency_s\": 3e-6},\n"
        "            {\"name\": \"ethernet\", \"nics_per_node\": 1, \"nic_bw_Bps\": 12.5e9, \"latency_s\": 2e-5}]}\n",
        f);
  fclose(f);
  ap_cluster *cl = NULL;
  ap_status st = ap_cluster_load(ctx, path, &cl);
  remove(path);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  const hw_cluster *c = hw_cluster_of(cl);
  assert_int_equal(c->n_devices, 12);
  assert_int_equal(c->n_levels, 3);
  assert_true(c->groups[0].levels[2].devices_per_nic == 4);
  assert_true(c->groups[0].levels[2].bw_Bps == 12.5e9 / 4);
  assert_string_equal(c->groups[0].device.name, "toy");
  hw_group_link gl;
  assert_int_equal(hw_cluster_level_for_group(ctx, c, 1, 4, &gl), AP_OK);
  assert_int_equal(gl.level, 1);
  assert_int_equal(gl.members_per_inner_domain, 2);
  assert_int_equal(hw_cluster_level_for_group(ctx, c, 4, 3, &gl), AP_OK);
  assert_int_equal(gl.level, 2);
  assert_true(gl.devices_per_nic == 4);
  ap_cluster_free(cl);
}

/* A valid inline node type, for the bad-input cases to break one field of. */
#define DEV "{\"name\":\"x\",\"peak_flop_per_s\":{\"bf16\":1e15},\"mem_bytes\":1000,\"mem_bw_Bps\":1e12}"
#define NV "{\"name\":\"nvlink\",\"domain_devices\":8,\"bw_Bps\":4e11,\"latency_s\":1e-6}"
#define NET "{\"name\":\"net\",\"bw_Bps\":5e10,\"latency_s\":1e-5}"

static const struct {
  const char *text;
  ap_status status;
  const char *message;
} bad_cases[] = {
    {"{", AP_PARSE, "bad.json:1:1: invalid JSON"},
    {"{\"device\": \"h100\",\n \"devices_per_node\": 8,,}", AP_PARSE, "bad.json:2:"},
    {"[]", AP_INVALID, "bad.json: expected a JSON object"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[{\"name\":\"nvlink\",\"domain_devices\":8,\"bw_Bps\":-5,"
     "\"latency_s\":1e-6}," NET "]}",
     AP_INVALID, "bad.json: levels[0].bw_Bps: expected a number > 0, got -5"},
    {"{\"device\":" DEV ",\"levels\":[" NV "," NET "]}", AP_INVALID,
     "bad.json: devices_per_node: required field missing"},
    {"{\"device\":" DEV ",\"devices_per_node\":0,\"levels\":[" NV "," NET "]}", AP_INVALID,
     "bad.json: devices_per_node: expected an integer in [1, 4194304], got 0"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"n_nodes\":-2,\"levels\":[" NV "," NET "]}", AP_INVALID,
     "bad.json: n_nodes: expected an integer in [1, 4194304], got -2"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"n_nodes\":1000000,\"levels\":[" NV "," NET "]}", AP_INVALID,
     "n_nodes: expected at most 4194304 devices"},
    {"{\"device\":" DEV ",\"devices_per_node\":\"8\",\"levels\":[" NV "," NET "]}", AP_INVALID,
     "devices_per_node: expected an integer, got a string"},
    {"{\"devices_per_node\":8,\"levels\":[" NV "," NET "]}", AP_INVALID, "bad.json: device: required field missing"},
    {"{\"device\":" DEV ",\"devices_per_node\":8}", AP_INVALID, "bad.json: levels: required field missing"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[]}", AP_INVALID, "levels: expected an array of 1 to 4"},
    {"{\"device\":\"h1000\",\"devices_per_node\":8,\"levels\":[" NV "," NET "]}", AP_NOTFOUND,
     "bad.json: device: unknown device 'h1000' (did you mean h100"},
    {"{\"node\":\"dgx-h10\"}", AP_NOTFOUND, "bad.json: node: unknown cluster preset 'dgx-h10' (did you mean dgx-h100"},
    {"{\"node\":\"dgx-h100\",\"n_node\":4}", AP_INVALID, "bad.json: n_node: unknown field (did you mean n_nodes"},
    {"{\"node\":\"dgx-h100\",\"devices_per_node\":16}", AP_OK, ""},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"n_nodes\":2,\"levels\":[{\"name\":\"nvlink\",\"domain_devices\":3,"
     "\"bw_Bps\":4e11,\"latency_s\":1e-6}," NET "]}",
     AP_INVALID, "levels[0].domain_devices: expected a divisor of devices_per_node (8) or a multiple of it, got 3"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"n_nodes\":2,\"levels\":[{\"name\":\"nvlink\",\"domain_devices\":12,"
     "\"bw_Bps\":4e11,\"latency_s\":1e-6}," NET "]}",
     AP_INVALID, "levels[0].domain_devices: expected a multiple of devices_per_node (8) for a domain spanning nodes"},
    {"{\"node\":\"dgx-h100\",\"devices_per_node\":3, \"n_nodes\": 2}", AP_OK, ""},
    {"{\"device\":{\"name\":\"x\",\"peak_flop_per_s\":{\"bf16\":1e15},\"mem_bytes\":1000,\"mem_bw_bps\":1e12},"
     "\"devices_per_node\":8,\"levels\":[" NV "," NET "]}",
     AP_INVALID, "bad.json: device.mem_bw_bps: unknown field (did you mean mem_bw_Bps?)"},
    {"{\"device\":{\"name\":\"x\",\"peak_flop_per_s\":{\"bf16\":1e15},\"mem_bytes\":0,\"mem_bw_Bps\":1e12},"
     "\"devices_per_node\":8,\"levels\":[" NV "," NET "]}",
     AP_INVALID, "device.mem_bytes: expected an integer >= 1, got 0"},
    {"{\"device\":{\"name\":\"x\",\"peak_flop_per_s\":{\"bf16\":0},\"mem_bytes\":1,\"mem_bw_Bps\":1e12},"
     "\"devices_per_node\":8,\"levels\":[" NV "," NET "]}",
     AP_INVALID, "device.peak_flop_per_s: expected at least one dtype with a peak > 0"},
    {"{\"device\":{\"name\":\"x\",\"peak_flop_per_s\":{\"fp64\":1e15},\"mem_bytes\":1,\"mem_bw_Bps\":1e12},"
     "\"devices_per_node\":8,\"levels\":[" NV "," NET "]}",
     AP_INVALID, "device.peak_flop_per_s.fp64: unknown field"},
    {"{\"device\":{\"name\":\"x\",\"peak_flop_per_s\":{\"bf16\":-1},\"mem_bytes\":1,\"mem_bw_Bps\":1e12},"
     "\"devices_per_node\":8,\"levels\":[" NV "," NET "]}",
     AP_INVALID, "device.peak_flop_per_s.bf16: expected a number >= 0, got -1"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV ",{\"name\":\"net\",\"domain_devices\":64,"
     "\"bw_Bps\":5e10,\"latency_s\":1e-5}]}",
     AP_INVALID, "levels[1].domain_devices: not allowed on the outermost level"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV ",{\"name\":\"net\",\"latency_s\":1e-5}]}",
     AP_INVALID, "levels[1].bw_Bps: required field missing (or give nic_bw_Bps and nics_per_node)"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[{\"name\":\"nvlink\",\"bw_Bps\":4e11,\"latency_s\":1e-6},"
     NET "]}",
     AP_INVALID, "levels[0].domain_devices: required field missing"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[{\"name\":\"nvlink\",\"domain_devices\":8,"
     "\"latency_s\":1e-6}," NET "]}",
     AP_INVALID, "levels[0].bw_Bps: required field missing"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[{\"name\":\"nvlink\",\"domain_devices\":8,"
     "\"bw_Bps\":4e11,\"latency_s\":1e-6,\"nics_per_node\":2}," NET "]}",
     AP_INVALID, "levels[0].nics_per_node: only the outermost level (the network) has NICs"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV ",{\"name\":\"net\",\"topology\":\"mesh\","
     "\"bw_Bps\":5e10,\"latency_s\":1e-5}]}",
     AP_INVALID, "levels[1].topology: expected \"switch\" on the outermost level"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[{\"name\":\"nvlink\",\"topology\":\"ring\","
     "\"domain_devices\":8,\"bw_Bps\":4e11,\"latency_s\":1e-6}," NET "]}",
     AP_INVALID, "levels[0].topology: expected \"switch\" or \"mesh\", got \"ring\""},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV "," NET "],\"inter_node\":{\"bw_Bps\":0}}",
     AP_INVALID, "inter_node.bw_Bps: expected a number > 0, got 0"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV "," NET "],\"inter_node\":{\"oversubscription\":0.5}}",
     AP_INVALID, "inter_node.oversubscription: expected a number in [1, 1e+06], got 0.5"},
    {"{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NV "," NET "],\"n_devices\":16}", AP_INVALID,
     "n_devices: expected 8 (the sum over the node groups), got 16"},
    {"{\"node_groups\":[{\"node\":\"dgx-h100\"}],\"device\":\"h100\"}", AP_INVALID,
     "device: give either node_groups or one node type at the top level, not both"},
    {"{\"node_groups\":[]}", AP_INVALID, "node_groups: expected an array of 1 to 64 node groups"},
    {"{\"node_groups\":[{\"node\":\"dgx-h100\"}, 3]}", AP_INVALID, "node_groups[1]: expected a node group object"},
    {"{\"node_groups\":[{\"node\":\"dgx-h100\"},{\"device\":" DEV ",\"devices_per_node\":8,\"levels\":[" NET "]}]}",
     AP_INVALID, "node_groups[1].levels: expected 2 link levels like node_groups[0], got 1"},
    {"{\"node_groups\":[{\"node\":\"dgx-h100\",\"devices_per_node\":0}]}", AP_INVALID,
     "node_groups[0].devices_per_node: expected an integer in [1, 4194304], got 0"},
    {"{\"name\":\"\",\"node\":\"dgx-h100\"}", AP_INVALID, "bad.json: name: expected 1 to 63 characters"},
    {"{\"node\":\"dgx-h100\",\"sources\":[1]}", AP_INVALID, "sources: expected an object of strings"},
    {"{\"node\":\"dgx-h100\",\"aliases\":\"x\"}", AP_INVALID, "aliases: expected an array of names"},
    {"{\"node\":\"dgx-h100\",\"device\":7}", AP_INVALID, "device: expected a device name or a device object"},
};

static void test_bad_input(void **state) {
  ap_ctx *ctx = *state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    ap_cluster *cl = NULL;
    ap_status st = hw_cluster_parse(ctx, "bad.json", bad_cases[i].text, strlen(bad_cases[i].text), &cl);
    if (st != bad_cases[i].status)
      fail_msg("case %zu: status %s, expected %s (%s)\n%s", i, ap_status_str(st), ap_status_str(bad_cases[i].status),
               ap_ctx_error(ctx), bad_cases[i].text);
    if (st) {
      assert_null(cl);
      assert_error_contains(ctx, bad_cases[i].message);
      assert_null(strchr(ap_ctx_error(ctx), '\n'));
    }
    ap_cluster_free(cl);
  }
}

/* ---- Lists and the public API's edges ---------------------------------------------------------------------- */

static void test_lists(void **state) {
  ap_ctx *ctx = *state;
  char *json = NULL, *text = NULL;
  assert_int_equal(ap_clusters_list_json(ctx, &json), AP_OK);
  json_error_t err;
  json_t *root = json_loads(json, 0, &err);
  if (!root) fail_msg("list is not JSON: %s\n%s", err.text, json);
  assert_true(json_array_size(json_object_get(root, "clusters")) >= 10);
  assert_true(json_array_size(json_object_get(root, "devices")) >= 10);
  json_t *first = json_array_get(json_object_get(root, "clusters"), 0);
  assert_non_null(json_object_get(first, "aliases"));
  assert_non_null(json_object_get(first, "levels"));
  json_decref(root);
  assert_int_equal(ap_clusters_list_text(ctx, &text), AP_OK);
  assert_contains(text, "dgx-h100");
  assert_contains(text, "gb200-nvl72");
  assert_contains(text, "mi300x");
  ap_free(json);
  ap_free(text);
}

static void test_api_edges(void **state) {
  ap_ctx *ctx = *state;
  ap_cluster_free(NULL);
  assert_int_equal(ap_cluster_n_devices(NULL), 0);
  assert_null(hw_cluster_of(NULL));
  assert_int_equal(ap_cluster_load(ctx, "h100:8", NULL), AP_INVALID);
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, NULL, &cl), AP_INVALID);
  assert_null(cl);
  char *json = (char *)"x";
  assert_int_equal(ap_cluster_describe_json(ctx, NULL, &json), AP_INVALID);
  assert_null(json);
  /* A NULL context is an invalid argument, as for every public function (include/autopar.h). */
  assert_int_equal(ap_cluster_load(NULL, "nope", &cl), AP_INVALID);
  hw_group_link gl;
  assert_int_equal(hw_cluster_level_for_group(ctx, NULL, 1, 1, &gl), AP_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_cluster_preset_loads, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_every_device_preset_parses, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_every_number_has_a_source, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_names_are_unique, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_runs_csv_device_names_resolve, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_device_lookup, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_dtype_table, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_shorthands, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_runs_csv_rows_load, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_level_for_group, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_level_for_group_matches_brute_force, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_heterogeneous_cluster, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_cluster_file_from_disk, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_bad_input, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_lists, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_api_edges, setup_ctx, teardown_ctx),
  };
  return cmocka_run_group_tests_name("hw", tests, NULL, NULL);
}
