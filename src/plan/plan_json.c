/* autopar's JSON form of a plan (plan layer), "autopar-plan/1", documented in docs/plan-format.md. The
 * writer puts down every field, so a plan written and read back is the same plan (plan_equal), and a file
 * written by plan_to_json is written again byte for byte after plan_from_json: `autopar plan` emits these
 * files and `autopar estimate --plan` reads them back unchanged. The reader is strict about names (an unknown
 * key is an error, which catches typos) and lenient about presence (absent fields take plan_defaults'
 * values), and it checks types and ranges only; the constraints between fields are plan_validate's. Both walk
 * the field table (plan_fields.c): its rows, in document order, say each field's section, key, kind and
 * range, so the format and the struct cannot drift apart. */
#include <stdio.h>
#include <string.h>

#include "plan/stack.h"
#include "plan/plan.h"

#define PLAN_FORMAT "autopar-plan/1"

/* ---- Writing ---- */

/* One field's value as JSON. */
static void put_value(strbuf *sb, const plan *p, const plan_field *f) {
  const char *at = (const char *)p + f->offset;
  switch (f->kind) {
  case PLAN_FK_INT: sb_printf(sb, "%lld", (long long)plan_field_int(p, f)); break;
  case PLAN_FK_BOOL: sb_puts(sb, plan_field_int(p, f) ? "true" : "false"); break;
  case PLAN_FK_ENUM: {
    int64_t v = plan_field_int(p, f);
    jx_sb_str(sb, v >= 0 && v < f->n_names ? f->names[v] : "?");
    break;
  }
  case PLAN_FK_ORDER: {
    const plan_axis *o = (const plan_axis *)(const void *)at;
    sb_puts(sb, "[");
    for (int i = 0; i < PLAN_N_ORDER; i++) {
      if (i) sb_puts(sb, ",");
      jx_sb_str(sb, plan_axis_name(o[i]));
    }
    sb_puts(sb, "]");
    break;
  }
  case PLAN_FK_LIST: {
    int64_t n = plan_field_int(p, f);
    n = n < 0 ? 0 : n > PLAN_MAX_CHUNKS ? PLAN_MAX_CHUNKS : n;
    const int32_t *v = (const int32_t *)(const void *)at;
    sb_puts(sb, "[");
    for (int64_t c = 0; c < n; c++) sb_printf(sb, "%s%d", c ? "," : "", (int)v[c]);
    sb_puts(sb, "]");
    break;
  }
  case PLAN_FK_NAME: {
    /* A name held in a fixed array, read safely even if it lacks its NUL. */
    char buf[PLAN_NAME_MAX];
    snprintf(buf, sizeof buf, "%.*s", PLAN_NAME_MAX - 1, at);
    jx_sb_str(sb, buf);
    break;
  }
  }
}

/* True when the writer leaves f out: PLAN_FF_OMIT_DEFAULT fields at their default (false, or an empty list);
 * fused_loss false is written where the stack's default loss is fused, since a plan that leaves it out takes
 * that default when read (plan_api.h plan_resolve). */
static bool omitted(const plan *p, const plan_field *f) {
  if (f->id == PLAN_F_FUSED_LOSS && plan_stack_fused_default(p->stack)) return false;
  return (f->flags & PLAN_FF_OMIT_DEFAULT) && plan_field_int(p, f) == f->def;
}

void plan_to_json(const plan *p, strbuf *sb) {
  sb_puts(sb, "{");
  sb_puts(sb, "\"format\":");
  jx_sb_str(sb, PLAN_FORMAT);
  size_t n_fields;
  const plan_field *fields = plan_fields(&n_fields);
  const char *open = ""; /* the section being written */
  bool first_in_section = false;
  for (size_t i = 0; i < n_fields; i++) {
    const plan_field *f = &fields[i];
    if (strcmp(f->section, open) != 0) {
      if (*open) sb_puts(sb, "}");
      open = f->section;
      if (*open) sb_printf(sb, ",\"%s\":{", open);
      first_in_section = *open != '\0';
    }
    if (omitted(p, f)) continue;
    sb_printf(sb, "%s\"%s\":", first_in_section ? "" : ",", f->json_key);
    first_in_section = false;
    put_value(sb, p, f);
  }
  if (*open) sb_puts(sb, "}");
  /* The per-op sharding specs (coming, docs/plan-format.md): written only when the plan has some, so that
   * the files of every transformer plan keep their form. No strategy makes them yet. */
  if (p->n_ops > 0) {
    sb_puts(sb, ",\"ops\":[");
    for (int32_t i = 0; i < p->n_ops; i++) sb_printf(sb, "%s{\"op\":%d}", i ? "," : "", (int)p->ops[i].op);
    sb_puts(sb, "]");
  }
  sb_puts(sb, "}");
}

/* ---- Reading ---- */

/* The most keys one object of the format holds. */
enum { MAX_KEYS = 24 };

/* The keys an object of the format may hold: the table's fields of that section, and at the top level the
 * format tag, the sections themselves and the reserved "ops". */
static size_t section_keys(const char *section, const char **keys) {
  size_t n_fields, n = 0;
  const plan_field *fields = plan_fields(&n_fields);
  if (!*section) {
    keys[n++] = "format";
    keys[n++] = "ops";
  }
  for (size_t i = 0; i < n_fields && n < MAX_KEYS; i++) {
    const char *k = NULL;
    if (strcmp(fields[i].section, section) == 0) k = fields[i].json_key;
    else if (!*section && *fields[i].section) k = fields[i].section;
    if (k && names_find(keys, n, k) < 0) keys[n++] = k;
  }
  return n;
}

/* An integer array of at most PLAN_MAX_CHUNKS entries, each in f's range; absent or null leaves it empty. */
static ap_status read_list(const jx_src *s, json_t *obj, const plan_field *f, plan *p) {
  json_t *list = jx_lookup(obj, f->json_key, NULL);
  if (!list) return AP_OK;
  if (!json_is_array(list)) return jx_fail(s, f->json_key, "expected an array of layer counts, one per chunk");
  size_t n = json_array_size(list);
  if (n > PLAN_MAX_CHUNKS)
    return jx_fail(s, f->json_key, "expected at most %d chunks, got %zu", PLAN_MAX_CHUNKS, n);
  int32_t *v = (int32_t *)(void *)((char *)p + f->offset);
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(list, i);
    if (!json_is_integer(e) || json_integer_value(e) < f->min || json_integer_value(e) > f->max)
      return jx_fail(s, f->json_key, "[%zu]: expected an integer in [%lld, %lld]", i, (long long)f->min,
                     (long long)f->max);
    v[i] = (int32_t)json_integer_value(e);
  }
  int32_t count = (int32_t)n;
  memcpy((char *)p + f->count_offset, &count, sizeof count);
  return AP_OK;
}

static ap_status read_order(const jx_src *s, json_t *obj, const plan_field *f, plan *p) {
  json_t *order = jx_lookup(obj, f->json_key, NULL);
  if (!order) return AP_OK;
  if (!json_is_array(order) || json_array_size(order) != PLAN_N_ORDER)
    return jx_fail(s, f->json_key, "expected an array of the %d axes tp, cp, ep, dp, pp", PLAN_N_ORDER);
  unsigned seen = 0;
  plan_axis *out = (plan_axis *)(void *)((char *)p + f->offset);
  for (size_t i = 0; i < PLAN_N_ORDER; i++) {
    json_t *e = json_array_get(order, i);
    plan_axis a;
    if (!json_is_string(e) || !plan_axis_from_name(json_string_value(e), &a) || (unsigned)a >= PLAN_N_ORDER)
      return jx_fail(s, f->json_key, "[%zu]: expected one of tp, cp, ep, dp, pp", i);
    if (seen & (1u << a)) return jx_fail(s, f->json_key, "\"%s\" appears twice", plan_axis_name(a));
    seen |= 1u << a;
    out[i] = a;
  }
  return AP_OK;
}

/* One field from its object; *found says whether the key was there. */
static ap_status read_field(const jx_src *s, json_t *obj, const plan_field *f, plan *p, bool *found) {
  *found = jx_lookup(obj, f->json_key, NULL) != NULL;
  switch (f->kind) {
  case PLAN_FK_INT: {
    int64_t v = plan_field_int(p, f);
    ap_status st = jx_i64(s, obj, f->json_key, false, f->min, f->max, &v, NULL);
    if (!st) {
      if (f->size == sizeof(int32_t)) {
        int32_t x = (int32_t)v;
        memcpy((char *)p + f->offset, &x, sizeof x);
      } else {
        memcpy((char *)p + f->offset, &v, sizeof v);
      }
    }
    return st;
  }
  case PLAN_FK_BOOL: return jx_bool(s, obj, f->json_key, false, (bool *)(void *)((char *)p + f->offset), NULL);
  case PLAN_FK_ENUM: {
    const char *v = NULL;
    ap_status st = jx_str(s, obj, f->json_key, false, &v, NULL);
    if (st || !v) return st;
    int i = names_find(f->names, (size_t)f->n_names, v);
    if (i < 0) {
      char list[128] = "";
      for (int k = 0; k < f->n_names; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", f->names[k]);
      return jx_fail(s, f->json_key, "expected one of %s, got \"%s\"", list, v);
    }
    memcpy((char *)p + f->offset, &i, sizeof i);
    return AP_OK;
  }
  case PLAN_FK_ORDER: return read_order(s, obj, f, p);
  case PLAN_FK_LIST: return read_list(s, obj, f, p);
  case PLAN_FK_NAME: {
    const char *v = NULL;
    ap_status st = jx_str(s, obj, f->json_key, false, &v, NULL);
    if (st || !v) return st;
    if (strlen(v) >= PLAN_NAME_MAX) return jx_fail(s, f->json_key, "longer than %d bytes", PLAN_NAME_MAX - 1);
    memcpy((char *)p + f->offset, v, strlen(v) + 1);
    return AP_OK;
  }
  }
  return AP_OK;
}

/* The reserved per-op specs: absent, null or [] (docs/plan-format.md "ops", coming). */
static ap_status read_ops(const jx_src *s, json_t *root) {
  json_t *ops = jx_lookup(root, "ops", NULL);
  if (!ops) return AP_OK;
  if (!json_is_array(ops)) return jx_fail(s, "ops", "expected an array of per-op sharding specs");
  if (json_array_size(ops) > 0)
    return jx_fail(s, "ops", "per-op sharding specs are reserved for general graphs and not read yet; expected []");
  return AP_OK;
}

/* n·m, or -1 when it exceeds PLAN_MAX_COUNT (then the batch is left for plan_validate to report). */
static int64_t mul_capped(int64_t n, int64_t m) {
  int64_t r;
  return __builtin_mul_overflow(n, m, &r) || r > PLAN_MAX_COUNT ? -1 : r;
}

ap_status plan_from_json(ap_ctx *ctx, const char *file, json_t *root, plan *out) {
  jx_src top = {ctx, file, ""};
  plan_defaults(out);
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a plan must be a JSON object", file);
  const char *keys[MAX_KEYS];
  ap_status st;
  if ((st = jx_check_keys(&top, root, keys, section_keys("", keys), 0))) return st;
  const char *format = NULL;
  if ((st = jx_str(&top, root, "format", false, &format, NULL))) return st;
  if (format && strcmp(format, PLAN_FORMAT) != 0)
    return jx_fail(&top, "format", "expected \"%s\", got \"%s\"", PLAN_FORMAT, format);

  size_t n_fields;
  const plan_field *fields = plan_fields(&n_fields);
  bool gbs_found = false, n_micro_found = false;
  const char *open = "";
  json_t *obj = root;
  jx_src s = top;
  for (size_t i = 0; i < n_fields; i++) {
    const plan_field *f = &fields[i];
    if (strcmp(f->section, open) != 0) {
      open = f->section;
      s = (jx_src){ctx, file, open};
      obj = root;
      if (*open) {
        obj = jx_lookup(root, open, NULL);
        if (obj && !json_is_object(obj)) return jx_fail(&top, open, "expected an object");
        if (obj && (st = jx_check_keys(&s, obj, keys, section_keys(open, keys), 0))) return st;
      }
    }
    if (!obj) continue;
    bool found = false;
    if ((st = read_field(&s, obj, f, out, &found))) return st;
    if (f->id == PLAN_F_GLOBAL_BATCH_SIZE) gbs_found = found;
    if (f->id == PLAN_F_N_MICRO_BATCHES) n_micro_found = found;
  }
  if ((st = read_ops(&top, root))) return st;

  /* Derive the missing batch field as Megatron does (arguments.py: num_micro_batches = global_batch_size /
   * (micro_batch_size · dp)). A global batch that does not divide is left for plan_validate to name. */
  int64_t per_step = mul_capped(out->micro_batch_size, out->dp);
  if (!n_micro_found && gbs_found) {
    if (per_step > 0 && out->global_batch_size % per_step == 0) out->n_micro_batches = out->global_batch_size / per_step;
  } else if (!gbs_found && per_step > 0) {
    int64_t gbs = mul_capped(per_step, out->n_micro_batches);
    if (gbs > 0) out->global_batch_size = gbs;
  }
  return AP_OK;
}
