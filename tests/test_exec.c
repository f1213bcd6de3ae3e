/* Tests of the executor's numerics (part "exec", src/exec/): the hand-written backward of every family (Llama
 * dense with grouped KV heads and untied head, Mixtral-style top-2 MoE, GPT-2) held against central finite
 * differences of the loss; recompute policies and the fused loss leave every gradient bit-for-bit equal;
 * AdamW against a scalar re-derivation of PyTorch's formula; safetensors round trip with BF16/F16 widening
 * and bad files; the data stream's offsets and wrapping. The multi-rank equality tests are CLI cases
 * (tests/cli_cases.txt), since they need mpirun. */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "exec/exec.h"
#include "exec/ex_sched.h"
#include "plan/plan.h"
#include "plan/schedule.h"
#include "model/safetensors.h"
#include "exec/graph/gx.h"

static ex_cfg tiny(ex_family fam, int64_t E) {
  ex_cfg c = {0};
  c.family = fam;
  c.V = 13;
  c.H = 8;
  c.L = 2;
  c.nh = 4;
  c.nkv = fam == EX_LLAMA ? 2 : 4;
  c.hd = 2;
  c.F = 12;
  c.P = 8;
  c.E = E;
  c.K = E ? 2 : 0;
  c.tied = fam == EX_GPT2;
  c.eps = 1e-5f;
  c.rope_theta = 10000.0;
  return c;
}

enum { B_ = 2, S_ = 5 };

typedef struct {
  ex_model m;
  float *w, *g;
  int32_t in[B_ * S_], lab[B_ * S_];
} fixture;

static void fixture_init(fixture *f, ex_cfg c) {
  assert_int_equal(ex_model_build(NULL, &c, &f->m), AP_OK);
  f->w = calloc((size_t)f->m.n_params, sizeof(float));
  f->g = calloc((size_t)f->m.n_params, sizeof(float));
  ex_init(&f->m, 7, f->w);
  /* larger weights than the init so that every nonlinearity is exercised */
  uint64_t s = 3;
  for (int64_t i = 0; i < f->m.n_params; i++) f->w[i] += (float)((double)(ex_splitmix64(&s) % 2001) / 1000.0 - 1.0) * 0.4f;
  ex_data d;
  ex_data_synthetic(5, c.V, &d);
  for (int j = 0; j < B_; j++) ex_data_batch(&d, 0, B_, j, S_, f->in + j * S_, f->lab + j * S_);
}

static void fixture_free(fixture *f) {
  free(f->w);
  free(f->g);
  ex_model_free(&f->m);
}

static double loss_at(fixture *f) {
  float *g = calloc((size_t)f->m.n_params, sizeof(float));
  double l = ex_fwd_bwd(&f->m, f->w, g, f->in, f->lab, B_, S_, 1.0, EX_RC_NONE, false);
  free(g);
  return l;
}

/* Central differences in fp32 with step h: truncation O(h²), rounding ~1e-7·loss/h. */
static void check_gradients(ex_cfg c) {
  fixture f;
  fixture_init(&f, c);
  memset(f.g, 0, (size_t)f.m.n_params * sizeof(float));
  double l0 = ex_fwd_bwd(&f.m, f.w, f.g, f.in, f.lab, B_, S_, 1.0, EX_RC_NONE, false);
  assert_true(l0 > 0);
  int checked = 0, bad = 0;
  for (int ti = 0; ti < f.m.n_t; ti++) {
    const ex_tensor *t = &f.m.t[ti];
    double gmax = 0; /* the tensor's largest gradient sets the absolute tolerance */
    for (int64_t i = 0; i < t->n; i++) gmax = fmax(gmax, fabs(f.g[t->off + i]));
    assert_true(gmax > 0);
    for (int k = 0; k < 12; k++) {
      int64_t i = t->off + (int64_t)((k * 7919 + ti * 31) % t->n);
      float keep = f.w[i], h = 1e-2f;
      f.w[i] = keep + h;
      double lp = loss_at(&f);
      f.w[i] = keep - h;
      double lm = loss_at(&f);
      f.w[i] = keep;
      double fd = (lp - lm) / (2.0 * (double)h);
      double err = fabs(fd - f.g[i]);
      checked++;
      if (err > 5e-3 * gmax + 1e-2 * fabs(fd)) {
        bad++;
        print_message("%s[%lld]: analytic %.6g, finite difference %.6g\n", t->name, (long long)(i - t->off), f.g[i], fd);
      }
    }
  }
  assert_true(checked > 20);
  assert_int_equal(bad, 0);
  fixture_free(&f);
}

static void test_grad_llama(void **s) {
  (void)s;
  check_gradients(tiny(EX_LLAMA, 0));
}

static void test_grad_llama_untied_vs_tied(void **s) {
  (void)s;
  ex_cfg c = tiny(EX_LLAMA, 0);
  c.tied = true;
  check_gradients(c);
}

static void test_grad_moe(void **s) {
  (void)s;
  check_gradients(tiny(EX_LLAMA, 4));
}

static void test_grad_gpt2(void **s) {
  (void)s;
  check_gradients(tiny(EX_GPT2, 0));
}

/* Recompute and the fused loss change only memory: the gradient is bit-for-bit the same. */
static void test_recompute_same_numbers(void **s) {
  (void)s;
  ex_family fams[] = {EX_LLAMA, EX_LLAMA, EX_GPT2};
  int64_t experts[] = {0, 4, 0};
  for (int k = 0; k < 3; k++) {
    fixture f;
    fixture_init(&f, tiny(fams[k], experts[k]));
    float *ref = calloc((size_t)f.m.n_params, sizeof(float));
    double l_ref = ex_fwd_bwd(&f.m, f.w, ref, f.in, f.lab, B_, S_, 0.1, EX_RC_NONE, false);
    for (int rc = EX_RC_SELECTIVE; rc <= EX_RC_FULL + 1; rc++) {
      memset(f.g, 0, (size_t)f.m.n_params * sizeof(float));
      bool fused = rc == EX_RC_FULL + 1;
      double l = ex_fwd_bwd(&f.m, f.w, f.g, f.in, f.lab, B_, S_, 0.1, fused ? EX_RC_NONE : (ex_recompute)rc, fused);
      assert_true(l == l_ref);
      assert_memory_equal(f.g, ref, (size_t)f.m.n_params * sizeof(float));
    }
    free(ref);
    fixture_free(&f);
  }
}

/* The split backward (zero-bubble B then W) gives bit for bit the gradient of the whole backward. */
static void test_split_backward(void **s) {
  (void)s;
  ex_family fams[] = {EX_LLAMA, EX_GPT2};
  for (int k = 0; k < 2; k++) {
    fixture f;
    fixture_init(&f, tiny(fams[k], 0));
    int64_t n = B_ * S_ * f.m.c.H;
    float *x = calloc((size_t)n, sizeof(float)), *y = calloc((size_t)n, sizeof(float));
    float *d1 = calloc((size_t)n, sizeof(float)), *d2 = calloc((size_t)n, sizeof(float));
    float *g2 = calloc((size_t)f.m.n_params, sizeof(float));
    ex_embed_fwd(&f.m, f.w, f.in, B_, S_, x);
    for (int64_t i = 0; i < n; i++) d1[i] = d2[i] = (float)((i % 7) - 3) * 0.1f;
    for (int rc = EX_RC_NONE; rc <= EX_RC_FULL; rc++) {
      memset(f.g, 0, (size_t)f.m.n_params * sizeof(float));
      memset(g2, 0, (size_t)f.m.n_params * sizeof(float));
      ex_act *a = ex_layer_fwd(&f.m, 1, f.w, x, y, B_, S_, (ex_recompute)rc, NULL);
      assert_true(ex_layer_bwd(&f.m, f.w, f.g, a, d1, d1));
      a = ex_layer_fwd(&f.m, 1, f.w, x, y, B_, S_, (ex_recompute)rc, NULL);
      assert_true(ex_layer_bwd_input(&f.m, f.w, g2, a, d2, d2));
      assert_memory_equal(d1, d2, (size_t)n * sizeof(float));
      int64_t q = f.m.lw[1].qkv;
      assert_true(g2[q] == 0.0f && f.g[q] != 0.0f); /* the weight gradients wait for W */
      ex_layer_bwd_weight(a);
      assert_memory_equal(f.g, g2, (size_t)f.m.n_params * sizeof(float));
      for (int64_t i = 0; i < n; i++) d1[i] = d2[i] = (float)((i % 7) - 3) * 0.1f;
    }
    free(x);
    free(y);
    free(d1);
    free(d2);
    free(g2);
    fixture_free(&f);
  }
}

/* The loss of the untrained init is close to ln V (uniform predictions). */
static void test_init_loss_near_uniform(void **s) {
  (void)s;
  ex_cfg c = tiny(EX_LLAMA, 0);
  ex_model m;
  assert_int_equal(ex_model_build(NULL, &c, &m), AP_OK);
  float *w = calloc((size_t)m.n_params, sizeof(float)), *g = calloc((size_t)m.n_params, sizeof(float));
  ex_init(&m, 0, w);
  ex_data d;
  ex_data_synthetic(0, c.V, &d);
  int32_t in[S_], lab[S_];
  ex_data_batch(&d, 0, 1, 0, S_, in, lab);
  double l = ex_fwd_bwd(&m, w, g, in, lab, 1, S_, 1.0, EX_RC_NONE, false) / S_;
  assert_rel_close(l, log(13.0), 0.02);
  free(w);
  free(g);
  ex_model_free(&m);
}

/* AdamW: two steps on a matrix and a vector against PyTorch's formula written out in double. */
static void test_adamw(void **s) {
  (void)s;
  ex_model m = {0};
  ex_tensor t[2] = {{.name = "w", .n_dims = 2, .shape = {2, 2}, .off = 0, .n = 4, .decay = true},
                    {.name = "b", .n_dims = 1, .shape = {2, 0}, .off = 4, .n = 2, .decay = false}};
  m.t = t;
  m.n_t = 2;
  m.n_params = 6;
  ex_adamw o = {3e-4, 0.9, 0.95, 1e-8, 0.1};
  float w[6] = {0.5f, -0.25f, 1.0f, 2.0f, 0.3f, -0.7f}, mom[6] = {0}, var[6] = {0};
  double wr[6], mr[6] = {0}, vr[6] = {0};
  for (int i = 0; i < 6; i++) wr[i] = w[i];
  float g1[6] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -3.0f}, g2[6] = {0.05f, 0.2f, -0.1f, 0.4f, -1.0f, 2.0f};
  for (int step = 1; step <= 2; step++) {
    const float *g = step == 1 ? g1 : g2;
    ex_adamw_step(&m, &o, step, w, g, mom, var, 0, 6);
    for (int i = 0; i < 6; i++) {
      if (i < 4) wr[i] *= 1 - o.lr * o.weight_decay;
      mr[i] = o.beta1 * mr[i] + (1 - o.beta1) * g[i];
      vr[i] = o.beta2 * vr[i] + (1 - o.beta2) * g[i] * g[i];
      double bc1 = 1 - pow(o.beta1, step), bc2 = 1 - pow(o.beta2, step);
      wr[i] -= o.lr / bc1 * mr[i] / (sqrt(vr[i]) / sqrt(bc2) + o.eps);
    }
  }
  for (int i = 0; i < 6; i++) assert_rel_close(w[i], wr[i], 1e-6);
  /* a shard update touches only its range */
  float w2[6] = {1, 1, 1, 1, 1, 1}, z[6] = {0}, z2[6] = {0};
  ex_adamw_step(&m, &o, 1, w2, g1, z, z2, 2, 5);
  assert_true(w2[0] == 1.0f && w2[1] == 1.0f && w2[5] == 1.0f && w2[2] != 1.0f);
}

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Hand-built file: BF16 and F16 tensors widen exactly. */
static void test_safetensors_dtypes(void **s) {
  ap_ctx *ctx = *s;
  const char hdr[] = "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                     "\"b\":{\"dtype\":\"F16\",\"shape\":[1,3],\"data_offsets\":[4,10]},\"__metadata__\":{\"x\":\"y\"}}";
  uint8_t buf[512];
  size_t n = strlen(hdr);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
  memcpy(buf + 8, hdr, n);
  /* bf16 1.5 = 0x3FC0, -2 = 0xC000; f16 1 = 0x3C00, -0.5 = 0xB800, smallest subnormal 0x0001 = 2^-24 */
  uint8_t data[] = {0xC0, 0x3F, 0x00, 0xC0, 0x00, 0x3C, 0x00, 0xB8, 0x01, 0x00};
  memcpy(buf + 8 + n, data, sizeof data);
  st_file f;
  assert_int_equal(st_parse(ctx, "t.safetensors", buf, 8 + n + sizeof data, &f), AP_OK);
  const st_tensor *a = st_find(&f, "a"), *b = st_find(&f, "b");
  assert_non_null(a);
  assert_non_null(b);
  assert_true(a->data[0] == 1.5f && a->data[1] == -2.0f);
  assert_int_equal(b->n_dims, 2);
  assert_true(b->data[0] == 1.0f && b->data[1] == -0.5f && b->data[2] == ldexpf(1.0f, -24));
  st_free(&f);
  /* bad files name the field */
  struct {
    const char *hdr, *want;
  } bad[] = {
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", "dtype"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", "data_offsets"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", "data_offsets"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
       "\"data_offsets\":[2,6]}}",
       "overlap"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "shape"},
      {"[1]", "header"},
  };
  for (size_t i = 0; i < AP_COUNT(bad); i++) {
    n = strlen(bad[i].hdr);
    for (int k = 0; k < 8; k++) buf[k] = (uint8_t)(n >> (8 * k));
    memcpy(buf + 8, bad[i].hdr, n);
    memset(buf + 8 + n, 0, 8);
    assert_int_not_equal(st_parse(ctx, "bad.safetensors", buf, 8 + n + 8, &f), AP_OK);
    assert_error_contains(ctx, bad[i].want);
  }
  memset(buf, 0xff, 8);
  assert_int_not_equal(st_parse(ctx, "bad.safetensors", buf, 16, &f), AP_OK);
  assert_error_contains(ctx, "header length");
}

/* Found by fuzz_safetensors: a size larger than the data is fine when another size is 0 (shape [0, 8] holds no
 * bytes), so the file st_write makes of it reads back; a size near 2^62 beside a 0 neither overflows nor is
 * refused. And st_write never follows the temporary name it used to take (PATH.tmp.PID, planted as a symlink). */
static void test_safetensors_empty_shape(void **s) {
  ap_ctx *ctx = *s;
  const char hdr[] = "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                     "\"z\":{\"dtype\":\"F32\",\"shape\":[0,8],\"data_offsets\":[4,4]},"
                     "\"h\":{\"dtype\":\"F16\",\"shape\":[4611686018427387904,4,0],\"data_offsets\":[4,4]}}";
  uint8_t buf[512];
  size_t n = strlen(hdr);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
  memcpy(buf + 8, hdr, n);
  const float one = 1.0f;
  memcpy(buf + 8 + n, &one, 4);
  st_file f;
  if (st_parse(ctx, "e.safetensors", buf, 8 + n + 4, &f)) fail_msg("%s", ap_ctx_error(ctx));
  const st_tensor *z = st_find(&f, "z"), *h = st_find(&f, "h");
  assert_true(z && z->n_elems == 0 && z->n_dims == 2 && z->shape[1] == 8);
  assert_true(h && h->n_elems == 0 && h->shape[0] == 4611686018427387904LL);
  char path[64], planted[96], victim[96];
  snprintf(path, sizeof path, "/tmp/ap_test_st_empty_%d.safetensors", (int)getpid());
  snprintf(planted, sizeof planted, "%s.tmp.%d", path, (int)getpid());
  snprintf(victim, sizeof victim, "%s.victim", path);
  write_bytes(victim, (const uint8_t *)"keep", 4);
  assert_int_equal(symlink(victim, planted), 0);
  st_out o[3];
  for (int i = 0; i < 3; i++) {
    o[i].name = f.t[i].name;
    o[i].n_dims = f.t[i].n_dims;
    memcpy(o[i].shape, f.t[i].shape, sizeof o[i].shape);
    o[i].data = f.t[i].data;
  }
  if (st_write(ctx, path, o, 3)) fail_msg("%s", ap_ctx_error(ctx));
  st_file back;
  if (st_read(ctx, path, &back)) fail_msg("%s", ap_ctx_error(ctx));
  assert_int_equal(back.n, 3);
  assert_true(st_find(&back, "s")->data[0] == 1.0f);
  assert_int_equal(st_find(&back, "z")->shape[1], 8);
  char *kept = NULL;
  assert_int_equal(util_read_file(ctx, victim, &kept, NULL), AP_OK);
  assert_string_equal(kept, "keep");
  free(kept);
  st_free(&back);
  st_free(&f);
  remove(path);
  remove(planted);
  remove(victim);
}

/* save then load gives the same buffer, for both families (GPT-2's Conv1D transposes both ways). */
static void test_safetensors_round_trip(void **s) {
  ap_ctx *ctx = *s;
  ex_family fams[] = {EX_LLAMA, EX_GPT2, EX_LLAMA};
  int64_t experts[] = {0, 0, 4};
  for (int k = 0; k < 3; k++) {
    fixture f;
    fixture_init(&f, tiny(fams[k], experts[k]));
    char path[64];
    snprintf(path, sizeof path, "/tmp/ap_test_exec_%d_%d.safetensors", (int)getpid(), k);
    assert_int_equal(ex_save(ctx, &f.m, path, f.w), AP_OK);
    float *back = calloc((size_t)f.m.n_params, sizeof(float));
    if (ex_load(ctx, &f.m, path, back)) fail_msg("%s", ap_ctx_error(ctx));
    assert_memory_equal(back, f.w, (size_t)f.m.n_params * sizeof(float));
    st_file sf;
    assert_int_equal(st_read(ctx, path, &sf), AP_OK);
    if (fams[k] == EX_GPT2) {
      const st_tensor *ca = st_find(&sf, "h.0.attn.c_attn.weight");
      assert_non_null(ca);
      assert_int_equal(ca->shape[0], 8); /* [in, out] */
      assert_int_equal(ca->shape[1], 24);
      assert_null(st_find(&sf, "lm_head.weight"));
    } else {
      assert_non_null(st_find(&sf, k == 2 ? "model.layers.1.block_sparse_moe.experts.3.w2.weight"
                                          : "model.layers.1.mlp.down_proj.weight"));
      assert_non_null(st_find(&sf, "lm_head.weight"));
    }
    st_free(&sf);
    /* a model with another shape refuses the file, naming the tensor */
    ex_cfg c2 = tiny(fams[k], experts[k]);
    c2.F = 10;
    ex_model m2;
    assert_int_equal(ex_model_build(ctx, &c2, &m2), AP_OK);
    float *w2 = calloc((size_t)m2.n_params, sizeof(float));
    assert_int_equal(ex_load(ctx, &m2, path, w2), AP_INVALID);
    assert_error_contains(ctx, "shape: expected");
    free(w2);
    ex_model_free(&m2);
    remove(path);
    free(back);
    fixture_free(&f);
  }
}

/* Batch j of step t starts at token (t·gbs + j)·seq; labels are shifted by one; the file wraps. */
static void test_data_stream(void **s) {
  ap_ctx *ctx = *s;
  char path[64];
  snprintf(path, sizeof path, "/tmp/ap_test_exec_%d.bin", (int)getpid());
  uint8_t b[20];
  for (int i = 0; i < 10; i++) {
    b[2 * i] = (uint8_t)i;
    b[2 * i + 1] = 0;
  }
  write_bytes(path, b, sizeof b);
  ex_data d;
  assert_int_equal(ex_data_open(ctx, path, 2, 50, &d), AP_OK);
  int32_t in[4], lab[4];
  ex_data_batch(&d, 1, 2, 1, 4, in, lab); /* o = (1·2+1)·4 = 12 → tokens 12..15 wrap to 2..5 */
  assert_int_equal(in[0], 2);
  assert_int_equal(in[3], 5);
  assert_int_equal(lab[0], 3);
  assert_int_equal(lab[3], 6);
  ex_data_free(&d);
  assert_int_equal(ex_data_open(ctx, path, 2, 5, &d), AP_INVALID);
  assert_error_contains(ctx, "token 5 is 5");
  write_bytes(path, b, 3);
  assert_int_equal(ex_data_open(ctx, path, 2, 50, &d), AP_INVALID);
  remove(path);
  /* the synthetic stream is a function of (seed, k) */
  ex_data s1, s2;
  ex_data_synthetic(1, 100, &s1);
  ex_data_synthetic(2, 100, &s2);
  int same = 0;
  for (int k = 0; k < 100; k++) {
    assert_true(ex_data_token(&s1, k) == ex_data_token(&s1, k));
    assert_true(ex_data_token(&s1, k) < 100);
    same += ex_data_token(&s1, k) == ex_data_token(&s2, k);
  }
  assert_true(same < 10);
}

/* The model loader's configs: GPT-2 and a Llama preset are accepted, other families refused naming the field. */
static void test_cfg_load(void **s) {
  ap_ctx *ctx = *s;
  ex_cfg c;
  assert_int_equal(ex_cfg_load(ctx, "gpt2", &c), AP_OK);
  assert_int_equal(c.family, EX_GPT2);
  assert_int_equal(c.H, 768);
  assert_true(c.tied);
  ex_model m;
  assert_int_equal(ex_model_build(ctx, &c, &m), AP_OK);
  assert_int_equal(m.n_params, 124439808); /* the published GPT-2 small count (wte, wpe, 12 blocks, ln_f) */
  ex_model_free(&m);
  assert_int_equal(ex_cfg_load(ctx, "llama-3.1-8b", &c), AP_UNSUPPORTED); /* rope_scaling (llama3) */
  assert_error_contains(ctx, "rope_scaling");
  assert_int_equal(ex_cfg_load(ctx, "deepseek-v3", &c), AP_UNSUPPORTED);
  assert_error_contains(ctx, "model_type");
  assert_int_equal(ex_cfg_load(ctx, "tests/data/exec/tiny-llama.json", &c), AP_OK);
  assert_int_equal(c.nkv, 2);
  assert_int_equal(ex_cfg_load(ctx, "tests/data/exec/tiny-mixtral.json", &c), AP_OK);
  assert_int_equal(c.E, 4);
}

/* The executor's per-rank orders are the shared schedule data (plan/schedule.h, which the simulator replays):
 * each item once, and when all ranks run their orders together, as the executor does with non-blocking sends
 * and blocking receives, every item's input is there (no deadlock); within the in-flight rule; and the
 * zero-bubble kinds put some W off behind later F or B work. */
static void test_schedule_orders(void **s) {
  ap_ctx *ctx = *s;
  struct {
    plan_schedule sched;
    int64_t pp, vpp, n_mb;
  } cfgs[] = {{PLAN_SCHED_GPIPE, 4, 1, 6},  {PLAN_SCHED_1F1B, 4, 1, 8},  {PLAN_SCHED_1F1B, 3, 1, 2},
              {PLAN_SCHED_INTERLEAVED_1F1B, 2, 2, 4}, {PLAN_SCHED_INTERLEAVED_1F1B, 4, 3, 8},
              {PLAN_SCHED_ZB_H1, 4, 1, 8}, {PLAN_SCHED_ZB_H1, 2, 1, 1}, {PLAN_SCHED_ZB_V, 4, 2, 8},
              {PLAN_SCHED_ZB_V, 2, 2, 3}, {PLAN_SCHED_ZB_V, 8, 2, 5}};
  for (size_t k = 0; k < AP_COUNT(cfgs); k++) {
    plan q;
    plan_defaults(&q);
    q.schedule = cfgs[k].sched;
    q.pp = cfgs[k].pp;
    q.vpp = cfgs[k].vpp;
    q.n_micro_batches = cfgs[k].n_mb;
    rk_plan p = {0};
    assert_int_equal(rk_schedule_fill(ctx, &q, &p), AP_OK);
    int64_t C = q.pp * q.vpp, M = q.n_micro_batches;
    bool split = q.schedule == PLAN_SCHED_ZB_H1 || q.schedule == PLAN_SCHED_ZB_V;
    int n[8], at[8] = {0};
    for (int r = 0; r < q.pp; r++) {
      n[r] = p.order_first[r + 1] - p.order_first[r];
      assert_int_equal(n[r], (int)((split ? 3 : 2) * M * q.vpp));
    }
    /* run all orders together: an item runs once what it needs has run */
    bool fd[64][16] = {{0}}, bd[64][16] = {{0}};
    int left = 0, late_w = 0;
    for (int r = 0; r < q.pp; r++) left += n[r];
    int64_t in_flight[8] = {0};
    while (left > 0) {
      int moved = 0;
      for (int r = 0; r < q.pp; r++) {
        if (at[r] == n[r]) continue;
        const rk_item *mine = p.order + p.order_first[r];
        rk_item it = mine[at[r]];
        assert_int_equal(plan_chunk_rank(&q, it.chunk), r);
        bool ready = it.kind == RK_F   ? (it.chunk == 0 || fd[it.mb][it.chunk - 1])
                     : it.kind == RK_B ? fd[it.mb][it.chunk] && (it.chunk == C - 1 || bd[it.mb][it.chunk + 1])
                                       : bd[it.mb][it.chunk];
        if (!ready) continue;
        if (it.kind == RK_F) {
          assert_false(fd[it.mb][it.chunk]);
          fd[it.mb][it.chunk] = true;
          in_flight[r]++;
        } else if (it.kind == RK_B) {
          assert_false(bd[it.mb][it.chunk]);
          bd[it.mb][it.chunk] = true;
          in_flight[r]--;
        } else {
          late_w += at[r] + 1 < n[r] && mine[at[r] + 1].kind != RK_W;
        }
        assert_true(in_flight[r] <= plan_schedule_in_flight_passes(&q, r));
        at[r]++;
        left--;
        moved++;
      }
      if (!moved) fail_msg("schedule %d (pp %lld): the orders deadlock", q.schedule, (long long)q.pp);
    }
    if (split && M > 1) assert_true(late_w > 0); /* some W runs before later F or B work: put off, not fused */
    rk_schedule_free(&p);
  }
  plan bad;
  plan_defaults(&bad);
  bad.pp = 0;
  rk_plan none = {0};
  assert_int_equal(rk_schedule_fill(ctx, &bad, &none), AP_INVALID);
  assert_null(none.order);
}

static int setup_ctx(void **state) {
  *state = ap_ctx_new();
  return *state ? 0 : -1;
}

static int teardown_ctx(void **state) {
  ap_ctx_free(*state);
  return 0;
}

/* The graph runtime's broadcast index (gx_tensor.c, with its fast path for a trailing-dims operand) equals numpy's
 * rule element for element on shapes of every kind, including matmul's operands whose two matrix dims are cut
 * from rank with their element count n left whole. */
static int64_t bcast_ref(const int64_t *td, int trank, int rank, const int64_t *dims, int64_t k) {
  int64_t idx = 0, stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t c = k % dims[d];
    k /= dims[d];
    int q = d - (rank - trank);
    if (q < 0) continue;
    if (td[q] != 1) idx += c * stride;
    stride *= td[q];
  }
  return idx;
}

static void test_gx_bcast_index(void **state) {
  (void)state;
  static const struct {
    int rank;
    int64_t dims[4];
    int trank;
    int64_t td[4];
    int64_t n; /* the operand's n as the runtime holds it */
  } cases[] = {
      {2, {3, 5}, 1, {5}, 5},          {2, {3, 5}, 2, {1, 5}, 5},       {2, {3, 5}, 2, {3, 1}, 3},
      {3, {2, 3, 4}, 0, {0}, 1},       {3, {2, 3, 4}, 3, {2, 1, 4}, 8}, {3, {2, 3, 4}, 2, {3, 4}, 12},
      {2, {2, 4}, 1, {4}, 4 * 6 * 7},  {2, {2, 4}, 2, {2, 4}, 8 * 6 * 7}, {4, {2, 3, 1, 5}, 4, {1, 3, 1, 1}, 3},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    gx_tensor t = {0};
    t.rank = cases[c].trank;
    for (int d = 0; d < t.rank; d++) t.dims[d] = cases[c].td[d];
    t.n = cases[c].n;
    int64_t total = 1;
    for (int d = 0; d < cases[c].rank; d++) total *= cases[c].dims[d];
    for (int64_t k = 0; k < total; k++) {
      int64_t got = gx_bcast_index(&t, cases[c].rank, cases[c].dims, k);
      int64_t want = bcast_ref(cases[c].td, cases[c].trank, cases[c].rank, cases[c].dims, k);
      if (got != want) fail_msg("case %zu, element %lld: %lld, want %lld", c, (long long)k, (long long)got, (long long)want);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grad_llama),
      cmocka_unit_test(test_grad_llama_untied_vs_tied),
      cmocka_unit_test(test_grad_moe),
      cmocka_unit_test(test_grad_gpt2),
      cmocka_unit_test(test_recompute_same_numbers),
      cmocka_unit_test(test_split_backward),
      cmocka_unit_test_setup_teardown(test_schedule_orders, setup_ctx, teardown_ctx),
      cmocka_unit_test(test_init_loss_near_uniform),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test_setup_teardown(test_safetensors_dtypes, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_safetensors_round_trip, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_safetensors_empty_shape, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_data_stream, setup_ctx, teardown_ctx),
      cmocka_unit_test_setup_teardown(test_cfg_load, setup_ctx, teardown_ctx),
      cmocka_unit_test(test_gx_bcast_index),
  };
  return cmocka_run_group_tests_name("exec", tests, NULL, NULL);
}
