/* The executor's model (exec layer): the config read through the model loader's HF config reader, the flat
 * parameter table with Hugging Face names and layouts, the seeded initialisation, and safetensors load/save.
 * Names and layouts: transformers' modeling_llama.py / modeling_mixtral.py (nn.Linear weights [out, in],
 * "model.layers.N.self_attn.q_proj.weight", "model.layers.N.block_sparse_moe.experts.E.w1.weight") and
 * modeling_gpt2.py (Conv1D weights stored [in, out]: "h.N.attn.c_attn.weight" [H, 3H]; checkpoints saved from
 * GPT2LMHeadModel prefix the names with "transformer.", which the loader accepts too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "exec/exec.h"
#include "model/hfconfig.h"
#include "model/safetensors.h"

uint64_t ex_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static ap_status unsupported(ap_ctx *ctx, const char *file, const char *field, const char *what) {
  return ctx_fail(ctx, AP_UNSUPPORTED, "%s: %s: %s (the executor runs the Llama, Mixtral and GPT-2 families)", file,
                  field, what);
}

/* Checks that c is a model the executor computes exactly, and fills out. */
static ap_status cfg_from_tf(ap_ctx *ctx, const char *file, json_t *root, const tf_config *c, ex_cfg *out) {
  memset(out, 0, sizeof *out);
  bool llama = strcmp(c->model_type, "llama") == 0 || strcmp(c->model_type, "mixtral") == 0;
  bool gpt2 = strcmp(c->model_type, "gpt2") == 0;
  if (!llama && !gpt2) return unsupported(ctx, file, "model_type", c->model_type);
  out->family = llama ? EX_LLAMA : EX_GPT2;
  out->V = c->vocab;
  out->H = c->hidden;
  out->L = c->n_layers;
  out->nh = c->heads;
  out->nkv = c->kv_heads;
  out->hd = c->head_dim;
  out->F = c->n_experts ? c->moe_ffn : c->ffn;
  out->P = c->max_pos;
  out->E = c->n_experts;
  out->K = c->top_k;
  out->tied = c->tied;
  if (out->L > EX_MAX_LAYERS) return unsupported(ctx, file, "num_hidden_layers", "more than 256 layers");
  if (out->E > EX_MAX_EXPERTS) return unsupported(ctx, file, "num_local_experts", "more than 64 experts");
  if (out->E && (out->K < 1 || out->K > out->E)) return unsupported(ctx, file, "num_experts_per_tok", "not in 1 … experts");
  if (out->nkv < 1 || out->nh % out->nkv) return unsupported(ctx, file, "num_key_value_heads", "must divide the heads");
  if (llama && (out->hd % 2)) return unsupported(ctx, file, "head_dim", "rotary embedding needs an even head dim");
  if (llama && (c->qkv_bias || c->o_bias || c->mlp_bias))
    return unsupported(ctx, file, "attention_bias", "biases on Llama projections are not implemented");
  for (int64_t i = 0; i < c->n_layers; i++)
    if (c->window_of_layer[i]) return unsupported(ctx, file, "sliding_window", "sliding-window attention");
  jx_src src = {ctx, file, ""};
  ap_status st;
  if (llama) {
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) return unsupported(ctx, file, "rope_scaling", "scaled RoPE is not implemented");
    double theta = 10000.0, eps = 1e-6; /* LlamaConfig's defaults (transformers configuration_llama.py) */
    if ((st = jx_f64(&src, root, "rope_theta", false, 1.0, 1e12, &theta, NULL))) return st;
    if ((st = jx_f64(&src, root, "rms_norm_eps", false, 0.0, 1.0, &eps, NULL))) return st;
    out->rope_theta = theta;
    out->eps = (float)eps;
    const char *act = NULL;
    if ((st = jx_str(&src, root, "hidden_act", false, &act, NULL))) return st;
    if (act && strcmp(act, "silu") != 0) return unsupported(ctx, file, "hidden_act", "only silu (SwiGLU)");
  } else {
    double eps = 1e-5; /* GPT2Config's layer_norm_epsilon default */
    if ((st = jx_f64(&src, root, "layer_norm_epsilon", false, 0.0, 1.0, &eps, NULL))) return st;
    out->eps = (float)eps;
    const char *act = NULL;
    if ((st = jx_str(&src, root, "activation_function", false, &act, NULL))) return st;
    if (act && strcmp(act, "gelu_new") != 0) return unsupported(ctx, file, "activation_function", "only gelu_new");
    out->tied = true; /* GPT2LMHeadModel ties lm_head to wte */
  }
  return AP_OK;
}

ap_status ex_cfg_load(ap_ctx *ctx, const char *spec, ex_cfg *out) {
  char label[320];
  char *text = NULL;
  size_t n = 0;
  ap_status st;
  bool is_path = strchr(spec, '/') || util_ends_with(spec, ".json");
  if (is_path) {
    snprintf(label, sizeof label, "%s", spec);
    if ((st = util_read_file(ctx, spec, &text, &n))) return st;
  } else {
    snprintf(label, sizeof label, "data/models/%s.json", spec);
    const embedded_file *f = embedded_find(label);
    if (!f) return ctx_fail(ctx, AP_NOTFOUND, "--model: unknown model preset \"%s\" (see `autopar models`)", spec);
    text = malloc(f->n_bytes + 1);
    if (!text) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    memcpy(text, f->text, f->n_bytes);
    n = f->n_bytes;
  }
  json_t *root = NULL;
  st = jx_parse(ctx, label, text, n, &root);
  free(text);
  if (st) return st;
  tf_config *c = calloc(1, sizeof *c);
  if (!c) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) st = hf_config_read(ctx, label, root, c);
  if (!st) st = tf_config_check(ctx, c, label);
  if (!st) st = cfg_from_tf(ctx, label, root, c, out);
  free(c);
  json_decref(root);
  return st;
}

typedef struct {
  ex_model *m;
  int cap;
  int64_t off;
  bool oom;
} builder;

static int64_t add(builder *b, int layer, bool conv1d, int64_t d0, int64_t d1, const char *fmt, ...) AP_PRINTF(6, 7);
static int64_t add(builder *b, int layer, bool conv1d, int64_t d0, int64_t d1, const char *fmt, ...) {
  if (b->m->n_t == b->cap) {
    int cap = b->cap ? 2 * b->cap : 64;
    ex_tensor *t = realloc(b->m->t, (size_t)cap * sizeof *t);
    if (!t) {
      b->oom = true;
      return -1;
    }
    b->m->t = t;
    b->cap = cap;
  }
  ex_tensor *t = &b->m->t[b->m->n_t++];
  memset(t, 0, sizeof *t);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->name, sizeof t->name, fmt, ap);
  va_end(ap);
  t->n_dims = d1 ? 2 : 1;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->n = d1 ? d0 * d1 : d0;
  t->off = b->off;
  t->decay = d1 != 0;
  t->conv1d = conv1d;
  t->layer = layer;
  b->off += t->n;
  return t->off;
}

ap_status ex_model_build(ap_ctx *ctx, const ex_cfg *c, ex_model *m) {
  memset(m, 0, sizeof *m);
  m->c = *c;
  builder b = {m, 0, 0, false};
  int64_t H = c->H, q = c->nh * c->hd, kv = c->nkv * c->hd, F = c->F;
  if (c->family == EX_LLAMA) {
    m->emb = add(&b, -1, false, c->V, H, "model.embed_tokens.weight");
    m->pos = -1;
    for (int l = 0; l < c->L; l++) {
      ex_layer_w *w = &m->lw[l];
      memset(w, 0xff, sizeof *w); /* every offset -1 */
      w->n1w = add(&b, l, false, H, 0, "model.layers.%d.input_layernorm.weight", l);
      w->qkv = add(&b, l, false, q, H, "model.layers.%d.self_attn.q_proj.weight", l);
      add(&b, l, false, kv, H, "model.layers.%d.self_attn.k_proj.weight", l);
      add(&b, l, false, kv, H, "model.layers.%d.self_attn.v_proj.weight", l);
      w->o = add(&b, l, false, H, q, "model.layers.%d.self_attn.o_proj.weight", l);
      w->n2w = add(&b, l, false, H, 0, "model.layers.%d.post_attention_layernorm.weight", l);
      if (c->E) {
        w->router = add(&b, l, false, c->E, H, "model.layers.%d.block_sparse_moe.gate.weight", l);
        for (int e = 0; e < c->E; e++) {
          w->e13[e] = add(&b, l, false, F, H, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e);
          add(&b, l, false, F, H, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e);
          w->e2[e] = add(&b, l, false, H, F, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
        }
      } else {
        w->up = add(&b, l, false, F, H, "model.layers.%d.mlp.gate_proj.weight", l);
        add(&b, l, false, F, H, "model.layers.%d.mlp.up_proj.weight", l);
        w->down = add(&b, l, false, H, F, "model.layers.%d.mlp.down_proj.weight", l);
      }
    }
    m->nfw = add(&b, -1, false, H, 0, "model.norm.weight");
    m->nfb = -1;
    m->head = c->tied ? m->emb : add(&b, -1, false, c->V, H, "lm_head.weight");
  } else {
    m->emb = add(&b, -1, false, c->V, H, "wte.weight");
    m->pos = add(&b, -1, false, c->P, H, "wpe.weight");
    for (int l = 0; l < c->L; l++) {
      ex_layer_w *w = &m->lw[l];
      memset(w, 0xff, sizeof *w);
      w->n1w = add(&b, l, false, H, 0, "h.%d.ln_1.weight", l);
      w->n1b = add(&b, l, false, H, 0, "h.%d.ln_1.bias", l);
      w->qkv = add(&b, l, true, 3 * H, H, "h.%d.attn.c_attn.weight", l);
      w->bqkv = add(&b, l, false, 3 * H, 0, "h.%d.attn.c_attn.bias", l);
      w->o = add(&b, l, true, H, H, "h.%d.attn.c_proj.weight", l);
      w->bo = add(&b, l, false, H, 0, "h.%d.attn.c_proj.bias", l);
      w->n2w = add(&b, l, false, H, 0, "h.%d.ln_2.weight", l);
      w->n2b = add(&b, l, false, H, 0, "h.%d.ln_2.bias", l);
      w->up = add(&b, l, true, F, H, "h.%d.mlp.c_fc.weight", l);
      w->bup = add(&b, l, false, F, 0, "h.%d.mlp.c_fc.bias", l);
      w->down = add(&b, l, true, H, F, "h.%d.mlp.c_proj.weight", l);
      w->bdown = add(&b, l, false, H, 0, "h.%d.mlp.c_proj.bias", l);
    }
    m->nfw = add(&b, -1, false, H, 0, "ln_f.weight");
    m->nfb = add(&b, -1, false, H, 0, "ln_f.bias");
    m->head = m->emb;
  }
  m->n_params = b.off;
  if (b.oom) {
    ex_model_free(m);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  return AP_OK;
}

void ex_model_free(ex_model *m) {
  free(m->t);
  m->t = NULL;
  m->n_t = 0;
}

/* A standard normal from two uniforms (Box and Muller 1958). */
static double normal(uint64_t *s) {
  double u1 = ((double)(ex_splitmix64(s) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(ex_splitmix64(s) >> 11) / 9007199254740992.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ex_init(const ex_model *m, uint64_t seed, float *w) {
  for (int i = 0; i < m->n_t; i++) {
    const ex_tensor *t = &m->t[i];
    float *p = w + t->off;
    bool norm_w = strstr(t->name, "norm.weight") || strstr(t->name, "layernorm.weight") || strstr(t->name, "ln_");
    if (t->n_dims == 1) {
      /* Norm weights 1, biases 0 (transformers' _init_weights for LlamaRMSNorm, nn.LayerNorm and biases). */
      float v = norm_w && !strstr(t->name, ".bias") ? 1.0f : 0.0f;
      for (int64_t k = 0; k < t->n; k++) p[k] = v;
      continue;
    }
    /* N(0, 0.02²) (initializer_range), GPT-2's residual projections (c_proj) N(0, (0.02/√(2L))²)
     * (GPT2PreTrainedModel._init_weights). Tensor i draws from its own stream seeded by (seed, i), so the
     * values do not depend on how ranks divide the model. */
    double sd = 0.02;
    if (m->c.family == EX_GPT2 && strstr(t->name, "c_proj.weight")) sd /= sqrt(2.0 * (double)m->c.L);
    uint64_t s = seed * UINT64_C(1099511628211) + (uint64_t)i + UINT64_C(1);
    for (int64_t k = 0; k < t->n; k++) p[k] = (float)(sd * normal(&s));
  }
}

/* Copies one tensor between HF layout (src/dst in the file) and the buffer, transposing Conv1D weights. */
static void copy_in(const ex_tensor *t, const float *src, float *dst) {
  if (!t->conv1d) {
    memcpy(dst, src, (size_t)t->n * sizeof *dst);
    return;
  }
  int64_t out = t->shape[0], in = t->shape[1]; /* buffer [out, in]; file [in, out] */
  for (int64_t i = 0; i < in; i++)
    for (int64_t o = 0; o < out; o++) dst[o * in + i] = src[i * out + o];
}

ap_status ex_load(ap_ctx *ctx, const ex_model *m, const char *path, float *w) {
  st_file f;
  ap_status st = st_read(ctx, path, &f);
  if (st) return st;
  for (int i = 0; i < m->n_t && !st; i++) {
    const ex_tensor *t = &m->t[i];
    const st_tensor *s = st_find(&f, t->name);
    char alt[EX_NAME_MAX + 16];
    snprintf(alt, sizeof alt, "transformer.%s", t->name);
    if (!s && m->c.family == EX_GPT2) s = st_find(&f, alt);
    int64_t d0 = t->conv1d ? t->shape[1] : t->shape[0], d1 = t->conv1d ? t->shape[0] : t->shape[1];
    if (!s) {
      st = ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\" is missing", path, t->name);
    } else if (s->n_dims != t->n_dims || s->shape[0] != d0 || (t->n_dims == 2 && s->shape[1] != d1)) {
      char want[64];
      if (t->n_dims == 2)
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
      else
        snprintf(want, sizeof want, "[%lld]", (long long)d0);
      st = ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape: expected %s", path, t->name, want);
    } else {
      /* A NaN or an infinity would make every loss NaN from the first step: said here, naming it. */
      int64_t k = 0;
      while (k < s->n_elems && isfinite(s->data[k])) k++;
      if (k < s->n_elems)
        st = ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": element %lld of %lld is %s; expected finite weights", path,
                      t->name, (long long)k, (long long)s->n_elems,
                      isnan(s->data[k]) ? "NaN" : s->data[k] > 0 ? "+Inf" : "-Inf");
      else
        copy_in(t, s->data, w + t->off);
    }
  }
  st_free(&f);
  return st;
}

ap_status ex_save(ap_ctx *ctx, const ex_model *m, const char *path, const float *w) {
  st_out *o = calloc((size_t)m->n_t, sizeof *o);
  float *tr = NULL;
  int64_t tr_n = 0;
  for (int i = 0; i < m->n_t; i++)
    if (m->t[i].conv1d) tr_n += m->t[i].n;
  tr = malloc((size_t)(tr_n ? tr_n : 1) * sizeof *tr);
  if (!o || !tr) {
    free(o);
    free(tr);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  }
  int64_t at = 0;
  for (int i = 0; i < m->n_t; i++) {
    const ex_tensor *t = &m->t[i];
    o[i].name = t->name;
    o[i].n_dims = t->n_dims;
    o[i].data = w + t->off;
    o[i].shape[0] = t->shape[0];
    o[i].shape[1] = t->shape[1];
    if (t->conv1d) { /* back to [in, out] */
      int64_t out = t->shape[0], in = t->shape[1];
      for (int64_t r = 0; r < out; r++)
        for (int64_t k = 0; k < in; k++) tr[at + k * out + r] = w[t->off + r * in + k];
      o[i].data = tr + at;
      o[i].shape[0] = in;
      o[i].shape[1] = out;
      at += t->n;
    }
  }
  ap_status st = st_write(ctx, path, o, m->n_t);
  free(o);
  free(tr);
  return st;
}
