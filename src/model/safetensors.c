/* safetensors reader and writer (model layer; format in safetensors.h). The executor (src/exec/) loads a
 * Hugging Face checkpoint's weights through st_read and writes trained weights through st_write; the reader
 * has a libFuzzer target (fuzz/fuzz_safetensors.c). Conversions: BF16 is the top half of an IEEE binary32
 * (exact widening); F16 is IEEE binary16 (subnormals, infinities and NaN widened exactly). */
#include "model/safetensors.h"

#include "core/jsonx.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The header is JSON of at most 100 MB (the reference implementation's limit, safetensors/src/tensor.rs
 * MAX_HEADER_SIZE). */
#define ST_MAX_HEADER ((uint64_t)100000000)

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400u));
      u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void st_free(st_file *f) {
  if (!f) return;
  for (int64_t i = 0; i < f->n; i++) {
    free(f->t[i].name);
    free(f->t[i].data);
  }
  free(f->t);
  f->t = NULL;
  f->n = 0;
}

const st_tensor *st_find(const st_file *f, const char *name) {
  for (int64_t i = 0; i < f->n; i++)
    if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
  return NULL;
}

/* The element count of a shape of sizes >= 0, or limit + 1 when it exceeds limit (limit < UINT64_MAX). A size 0
 * makes the count 0 whatever the others are, so the product is taken only over sizes >= 1 and never overflows. */
static uint64_t shape_elems(int n_dims, const int64_t *shape, uint64_t limit) {
  for (int d = 0; d < n_dims; d++)
    if (shape[d] == 0) return 0;
  uint64_t n = 1;
  for (int d = 0; d < n_dims; d++) {
    if (shape[d] < 0 || (uint64_t)shape[d] > limit / n) return limit + 1;
    n *= (uint64_t)shape[d];
  }
  return n;
}

typedef struct {
  uint64_t begin, end;
} st_range;

static int range_cmp(const void *a, const void *b) {
  const st_range *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Reads one header entry into t; data points at the byte after the header, n_data bytes long. */
static ap_status parse_entry(ap_ctx *ctx, const char *file, const char *name, json_t *v, const uint8_t *data,
                             uint64_t n_data, st_tensor *t, st_range *r) {
  if (!json_is_object(v)) return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": expected an object", file, name);
  json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"), *jo = json_object_get(v, "data_offsets");
  if (!json_is_string(jd)) return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": dtype: expected a string", file, name);
  const char *dt = json_string_value(jd);
  /* Integer tensors (I64, I32: class ids, token ids) are read as their fp32 values (exact below 2^24). */
  bool is_int = strcmp(dt, "I64") == 0 || strcmp(dt, "I32") == 0;
  int width = strcmp(dt, "F32") == 0 || strcmp(dt, "I32") == 0 ? 4
              : strcmp(dt, "I64") == 0                          ? 8
              : (strcmp(dt, "BF16") == 0 || strcmp(dt, "F16") == 0) ? 2
                                                                    : 0;
  if (!width)
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s: tensor \"%s\": dtype: \"%s\" is not supported (F32, BF16, F16, I64 or I32)",
                    file, name, dt);
  if (!json_is_array(js) || json_array_size(js) > ST_MAX_DIMS)
    return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape: expected an array of at most %d sizes", file, name,
                    ST_MAX_DIMS);
  t->n_dims = (int)json_array_size(js);
  for (int d = 0; d < t->n_dims; d++) {
    json_t *x = json_array_get(js, (size_t)d);
    if (!json_is_integer(x) || json_integer_value(x) < 0)
      return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape[%d]: expected a size (an integer >= 0)", file, name, d);
    t->shape[d] = (int64_t)json_integer_value(x);
  }
  /* A size may exceed the file when another is 0 (shape [0, 8] holds no bytes). */
  uint64_t n_elems = shape_elems(t->n_dims, t->shape, n_data);
  if (n_elems > n_data) return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape: larger than the file", file, name);
  if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
      !json_is_integer(json_array_get(jo, 1)))
    return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": data_offsets: expected [begin, end]", file, name);
  json_int_t b = json_integer_value(json_array_get(jo, 0)), e = json_integer_value(json_array_get(jo, 1));
  if (b < 0 || e < b || (uint64_t)e > n_data)
    return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": data_offsets: [%lld, %lld] outside the %llu data bytes", file,
                    name, (long long)b, (long long)e, (unsigned long long)n_data);
  if ((uint64_t)(e - b) != n_elems * (uint64_t)width)
    return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": data_offsets: %lld bytes, but %s of this shape takes %llu", file,
                    name, (long long)(e - b), dt, (unsigned long long)(n_elems * (uint64_t)width));
  t->n_elems = (int64_t)n_elems;
  t->data = malloc(n_elems ? n_elems * sizeof(float) : 1);
  t->name = strdup(name);
  if (!t->data || !t->name) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  const uint8_t *p = data + b;
  for (uint64_t i = 0; i < n_elems; i++) {
    if (is_int) {
      uint64_t u = 0;
      for (int k = 0; k < width; k++) u |= (uint64_t)p[(uint64_t)width * i + (uint64_t)k] << (8 * k);
      if (width == 4 && (u >> 31)) u |= ~(uint64_t)0 << 32; /* sign-extend I32 */
      t->data[i] = (float)(int64_t)u;
    } else if (width == 4) {
      uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                   (uint32_t)p[4 * i + 3] << 24;
      memcpy(&t->data[i], &u, sizeof u);
    } else {
      uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
      t->data[i] = dt[0] == 'B' ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  r->begin = (uint64_t)b;
  r->end = (uint64_t)e;
  return AP_OK;
}

ap_status st_parse(ap_ctx *ctx, const char *file, const uint8_t *bytes, size_t n_bytes, st_file *out) {
  memset(out, 0, sizeof *out);
  if (n_bytes < 8) return ctx_fail(ctx, AP_INVALID, "%s: not a safetensors file (shorter than its 8-byte header length)", file);
  uint64_t n_header = 0;
  for (int i = 7; i >= 0; i--) n_header = n_header << 8 | bytes[i];
  if (n_header > ST_MAX_HEADER || n_header > n_bytes - 8)
    return ctx_fail(ctx, AP_INVALID, "%s: header length %llu exceeds the file (%zu bytes)", file,
                    (unsigned long long)n_header, n_bytes);
  json_error_t jerr;
  json_t *root = json_loadb((const char *)bytes + 8, (size_t)n_header, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) return ctx_fail(ctx, AP_INVALID, "%s: header: %s", file, jerr.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return ctx_fail(ctx, AP_INVALID, "%s: header: expected a JSON object", file);
  }
  const uint8_t *data = bytes + 8 + n_header;
  uint64_t n_data = n_bytes - 8 - n_header;
  size_t cap = json_object_size(root);
  out->t = calloc(cap ? cap : 1, sizeof *out->t);
  st_range *ranges = calloc(cap ? cap : 1, sizeof *ranges);
  ap_status st = (!out->t || !ranges) ? ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file) : AP_OK;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (st) break;
    if (strcmp(key, "__metadata__") == 0) {
      if (!json_is_object(v)) st = ctx_fail(ctx, AP_INVALID, "%s: __metadata__: expected an object of strings", file);
      continue;
    }
    st = parse_entry(ctx, file, key, v, data, n_data, &out->t[out->n], &ranges[out->n]);
    out->n++;
  }
  if (!st && out->n > 1) {
    qsort(ranges, (size_t)out->n, sizeof *ranges, range_cmp);
    for (int64_t i = 1; i < out->n && !st; i++)
      if (ranges[i].begin < ranges[i - 1].end)
        st = ctx_fail(ctx, AP_INVALID, "%s: data_offsets: two tensors overlap at byte %llu", file,
                      (unsigned long long)ranges[i].begin);
  }
  free(ranges);
  json_decref(root);
  if (st) st_free(out);
  return st;
}

ap_status st_read(ap_ctx *ctx, const char *path, st_file *out) {
  char *bytes = NULL;
  size_t n = 0;
  memset(out, 0, sizeof *out);
  ap_status st = util_read_file(ctx, path, &bytes, &n);
  if (st) return st;
  st = st_parse(ctx, path, (const uint8_t *)bytes, n, out);
  free(bytes);
  return st;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The most values one tensor may have in a written file: its bytes (4 each) must fit the header's offsets. */
#define ST_MAX_WRITE_ELEMS (UINT64_MAX / 16)

ap_status st_write(ap_ctx *ctx, const char *path, const st_out *tensors, int64_t n) {
  strbuf hdr = {0};
  uint64_t off = 0;
  sb_puts(&hdr, "{");
  for (int64_t i = 0; i < n; i++) {
    const st_out *o = &tensors[i];
    uint64_t ne = o->n_dims >= 0 && o->n_dims <= ST_MAX_DIMS ? shape_elems(o->n_dims, o->shape, ST_MAX_WRITE_ELEMS)
                                                             : ST_MAX_WRITE_ELEMS + 1;
    if (ne > ST_MAX_WRITE_ELEMS || 4 * ne > UINT64_MAX / 2 - off) {
      sb_free(&hdr);
      return ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape: expected at most %d sizes >= 0 of a writable size",
                      path, o->name, ST_MAX_DIMS);
    }
    if (i) sb_puts(&hdr, ",");
    jx_sb_str(&hdr, o->name);
    sb_puts(&hdr, ":{\"dtype\":\"F32\",\"shape\":[");
    for (int d = 0; d < o->n_dims; d++) sb_printf(&hdr, "%s%lld", d ? "," : "", (long long)o->shape[d]);
    sb_printf(&hdr, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + 4 * ne));
    off += 4 * ne;
  }
  sb_puts(&hdr, "}");
  /* The reference writer pads the header with spaces to a multiple of 8 bytes (safetensors/src/tensor.rs). */
  while (hdr.len % 8) sb_puts(&hdr, " ");
  if (hdr.oom) {
    sb_free(&hdr);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  }
  /* Through the library's writer: an exclusive temporary beside the target, renamed at the end. */
  util_writer *w;
  ap_status st = util_write_open(ctx, path, &w);
  if (st) {
    sb_free(&hdr);
    return st;
  }
  uint8_t buf[4096];
  put_u64(buf, hdr.len);
  util_write_put(w, buf, 8);
  util_write_put(w, hdr.buf, hdr.len);
  sb_free(&hdr);
  for (int64_t i = 0; i < n; i++) {
    uint64_t ne = shape_elems(tensors[i].n_dims, tensors[i].shape, ST_MAX_WRITE_ELEMS);
    size_t fill = 0;
    for (uint64_t k = 0; k < ne; k++) {
      uint32_t u;
      memcpy(&u, &tensors[i].data[k], sizeof u);
      for (int j = 0; j < 4; j++) buf[fill++] = (uint8_t)(u >> (8 * j));
      if (fill == sizeof buf || k + 1 == ne) {
        util_write_put(w, buf, fill);
        fill = 0;
      }
    }
  }
  return util_write_close(ctx, path, w, true);
}
