/*
 * gpuprof: measure a GPU's compute and memory efficiency for autopar's cost model.
 *
 * Measures, with CUDA events (warm-up, adaptive repetitions, median), on random data:
 *   - cuBLASLt GEMM throughput in bf16 (bf16 in/out, fp32 accumulate) and fp8 (e4m3 in, bf16 out,
 *     fp32 accumulate, per-tensor scale pointers, fast accumulation) over transformer layer shapes;
 *   - the attention core as batched GEMMs (QK^T and PV, cublasGemmStridedBatchedEx, bf16) plus a
 *     row softmax pass;
 *   - memory-bound kernels: device-to-device copy, a bf16 elementwise kernel and an RMSNorm kernel;
 * and writes the result as autopar-profile/1 JSON (docs/profile-format.md).
 *
 * Build: make -C tools/gpuprof (nvcc -arch=sm_90 -O2, -lcublasLt -lcublas).
 * Run:   tools/gpuprof/gpuprof -o profile.json      (or: tools/gpuprof/gpuprof --list, no GPU needed)
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef __nv_bfloat16 bf16;
typedef __nv_fp8_e4m3 fp8;

/* ------------------------------------------------------------------------------------------------ */
/* Error checking                                                                                    */
/* ------------------------------------------------------------------------------------------------ */

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "gpuprof: FATAL %s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call,     \
                    cudaGetErrorName(e_), cudaGetErrorString(e_));                                  \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

#define CKLAUNCH() CK(cudaGetLastError())

#define CKB(call)                                                                                   \
    do {                                                                                            \
        cublasStatus_t s_ = (call);                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
            fprintf(stderr, "gpuprof: FATAL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call,          \
                    cublasGetStatusString(s_));                                                     \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

static void die(const char *msg) {
    fprintf(stderr, "gpuprof: FATAL: %s\n", msg);
    exit(2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of host memory");
    return p;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ------------------------------------------------------------------------------------------------ */
/* Kernels                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

__host__ __device__ static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* uniform in [-1, 1) */
__host__ __device__ static inline float urand(uint64_t seed, uint64_t i) {
    uint64_t r = splitmix64(seed * 0x100000001B3ull ^ i);
    return (float)((double)(r >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

__global__ void fill_bf16_kernel(bf16 *p, size_t n, uint64_t seed, float scale) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = __float2bfloat16(scale * urand(seed, i));
}

__global__ void fill_fp8_kernel(fp8 *p, size_t n, uint64_t seed, float scale) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = fp8(scale * urand(seed, i));
}

/* Busy-wait on the GPU so that the host can queue a whole batch of launches ahead of the timed region. */
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* y = x * scale + b over bf16, 16-byte (8 x bf16) vectors; each thread loads AXPB_UNROLL vectors (all
 * loads issued before the first use), the block's vectors strided by blockDim so that a warp's accesses
 * are coalesced. n8 = number of 8-vectors. */
#define AXPB_THREADS 256
#define AXPB_UNROLL 4
__global__ void __launch_bounds__(AXPB_THREADS) axpb_bf16_kernel(const uint4 *__restrict__ x, uint4 *__restrict__ y,
                                                                 size_t n8, float scale, float b) {
    size_t base = (size_t)blockIdx.x * (AXPB_THREADS * AXPB_UNROLL) + threadIdx.x;
    uint4 v[AXPB_UNROLL];
#pragma unroll
    for (int u = 0; u < AXPB_UNROLL; u++) {
        size_t i = base + (size_t)u * AXPB_THREADS;
        if (i < n8) v[u] = x[i];
    }
#pragma unroll
    for (int u = 0; u < AXPB_UNROLL; u++) {
        size_t i = base + (size_t)u * AXPB_THREADS;
        if (i >= n8) continue;
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v[u]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 f = __bfloat1622float2(h[j]);
            f.x = fmaf(f.x, scale, b);
            f.y = fmaf(f.y, scale, b);
            h[j] = __float22bfloat162_rn(f);
        }
        y[i] = v[u];
    }
}

#define RED_THREADS 256

__device__ static inline float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide reductions for RED_THREADS threads; sh must hold RED_THREADS/32 floats. */
__device__ static inline float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = 0.0f;
#pragma unroll
    for (int w = 0; w < RED_THREADS / 32; w++) r += sh[w];
    __syncthreads();
    return r;
}

__device__ static inline float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = -INFINITY;
#pragma unroll
    for (int w = 0; w < RED_THREADS / 32; w++) r = fmaxf(r, sh[w]);
    __syncthreads();
    return r;
}

/* RMSNorm over rows of H = RED_THREADS * 8 * V bf16 elements: y = x * rsqrt(mean(x^2) + eps) * w.
 * One block per row, the row held in registers (one read of x, one write of y). */
template <int V>
__global__ void __launch_bounds__(RED_THREADS) rmsnorm_kernel(const uint4 *__restrict__ x, const uint4 *__restrict__ w,
                                                              uint4 *__restrict__ y, float eps) {
    __shared__ float sh[RED_THREADS / 32];
    const int H8 = RED_THREADS * V; /* 8-vectors per row */
    const uint4 *xr = x + (size_t)blockIdx.x * H8;
    uint4 *yr = y + (size_t)blockIdx.x * H8;
    uint4 v[V];
#pragma unroll
    for (int j = 0; j < V; j++) v[j] = xr[threadIdx.x + j * RED_THREADS];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++) {
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v[j]);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float2 f = __bfloat1622float2(h[q]);
            ss = fmaf(f.x, f.x, fmaf(f.y, f.y, ss));
        }
    }
    ss = block_sum(ss, sh);
    float inv = rsqrtf(ss / (float)(H8 * 8) + eps);
#pragma unroll
    for (int j = 0; j < V; j++) {
        uint4 wv = w[threadIdx.x + j * RED_THREADS];
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v[j]);
        const __nv_bfloat162 *hw = reinterpret_cast<const __nv_bfloat162 *>(&wv);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float2 f = __bfloat1622float2(h[q]);
            float2 g = __bfloat1622float2(hw[q]);
            f.x = f.x * inv * g.x;
            f.y = f.y * inv * g.y;
            h[q] = __float22bfloat162_rn(f);
        }
        yr[threadIdx.x + j * RED_THREADS] = v[j];
    }
}

/* Row softmax of the attention scores: p = exp(scale * (s - max)) / sum, rows of L = RED_THREADS*8*V
 * bf16 elements, one block per row, the row held in registers. */
template <int V>
__global__ void __launch_bounds__(RED_THREADS) softmax_kernel(const uint4 *__restrict__ s, uint4 *__restrict__ p,
                                                              float scale) {
    __shared__ float sh[RED_THREADS / 32];
    const int L8 = RED_THREADS * V;
    const uint4 *sr = s + (size_t)blockIdx.x * L8;
    uint4 *pr = p + (size_t)blockIdx.x * L8;
    float f[V][8];
#pragma unroll
    for (int j = 0; j < V; j++) {
        uint4 v = sr[threadIdx.x + j * RED_THREADS];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float2 t = __bfloat1622float2(h[q]);
            f[j][2 * q] = t.x * scale;
            f[j][2 * q + 1] = t.y * scale;
        }
    }
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < V; j++)
#pragma unroll
        for (int q = 0; q < 8; q++) mx = fmaxf(mx, f[j][q]);
    mx = block_max(mx, sh);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
#pragma unroll
        for (int q = 0; q < 8; q++) {
            f[j][q] = __expf(f[j][q] - mx);
            sum += f[j][q];
        }
    sum = block_sum(sum, sh);
    float inv = 1.0f / sum;
#pragma unroll
    for (int j = 0; j < V; j++) {
        uint4 v;
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
        for (int q = 0; q < 4; q++) h[q] = __float22bfloat162_rn(make_float2(f[j][2 * q] * inv, f[j][2 * q + 1] * inv));
        pr[threadIdx.x + j * RED_THREADS] = v;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* Device helpers                                                                                    */
/* ------------------------------------------------------------------------------------------------ */

static cudaStream_t g_stream;
static int g_num_sms = 132;

static void fill_bf16(bf16 *p, size_t n, uint64_t seed, float scale) {
    fill_bf16_kernel<<<g_num_sms * 8, 256, 0, g_stream>>>(p, n, seed, scale);
    CKLAUNCH();
}

static void fill_fp8(fp8 *p, size_t n, uint64_t seed, float scale) {
    fill_fp8_kernel<<<g_num_sms * 8, 256, 0, g_stream>>>(p, n, seed, scale);
    CKLAUNCH();
}

static void *dmalloc(size_t bytes) {
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 256));
    return p;
}

static void launch_axpb(const void *x, void *y, size_t n8, float scale, float b) {
    size_t per = AXPB_THREADS * AXPB_UNROLL, blocks = (n8 + per - 1) / per;
    if (blocks > 2147483647u) die("axpb: too many blocks");
    axpb_bf16_kernel<<<(unsigned)blocks, AXPB_THREADS, 0, g_stream>>>((const uint4 *)x, (uint4 *)y, n8, scale, b);
    CKLAUNCH();
}

static void launch_rmsnorm(const bf16 *x, const bf16 *w, bf16 *y, int rows, int hidden) {
    const uint4 *xv = (const uint4 *)x;
    const uint4 *wv = (const uint4 *)w;
    uint4 *yv = (uint4 *)y;
    switch (hidden) {
    case 4096: rmsnorm_kernel<2><<<rows, RED_THREADS, 0, g_stream>>>(xv, wv, yv, 1e-6f); break;
    case 8192: rmsnorm_kernel<4><<<rows, RED_THREADS, 0, g_stream>>>(xv, wv, yv, 1e-6f); break;
    default: die("rmsnorm: unsupported hidden size");
    }
    CKLAUNCH();
}

static void launch_softmax(const bf16 *s, bf16 *p, long long rows, int len, float scale) {
    const uint4 *sv = (const uint4 *)s;
    uint4 *pv = (uint4 *)p;
    if (rows > 2147483647LL) die("softmax: too many rows");
    switch (len) {
    case 2048: softmax_kernel<1><<<(unsigned)rows, RED_THREADS, 0, g_stream>>>(sv, pv, scale); break;
    case 4096: softmax_kernel<2><<<(unsigned)rows, RED_THREADS, 0, g_stream>>>(sv, pv, scale); break;
    case 8192: softmax_kernel<4><<<(unsigned)rows, RED_THREADS, 0, g_stream>>>(sv, pv, scale); break;
    default: die("softmax: unsupported row length");
    }
    CKLAUNCH();
}

/* ------------------------------------------------------------------------------------------------ */
/* Timing: warm-up, a probe, then B batches of R back-to-back launches queued behind a spin kernel;   */
/* the result is the median over batches of (batch time / R).                                        */
/* ------------------------------------------------------------------------------------------------ */

typedef int (*op_fn)(void *ctx, int iter); /* enqueue one operation on g_stream; 0 = ok */

#define MAX_BATCHES 15
#define MAX_PER_BATCH 32
#define TARGET_S 0.020 /* measure each shape for about 20 ms */
#define BATCH_MIN_S 0.0005

static cudaEvent_t g_ev[MAX_BATCHES + 1];

typedef struct {
    int ok;
    double time_s; /* median per-operation time */
    int reps;      /* timed operations */
} timing_t;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static timing_t time_op(op_fn fn, void *ctx) {
    timing_t r = {0, 0.0, 0};
    int iter = 0;
    if (fn(ctx, iter++)) return r; /* warm-up */
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaEventRecord(g_ev[0], g_stream));
    if (fn(ctx, iter++)) return r; /* probe */
    CK(cudaEventRecord(g_ev[1], g_stream));
    CK(cudaEventSynchronize(g_ev[1]));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, g_ev[0], g_ev[1]));
    double t = ms > 0.0f ? 1e-3 * ms : 1e-6;
    int R = (int)ceil(BATCH_MIN_S / t);
    if (R < 1) R = 1;
    if (R > MAX_PER_BATCH) R = MAX_PER_BATCH;
    int B = (int)ceil(TARGET_S / (R * t));
    if (B < 3) B = 3;
    if (B > MAX_BATCHES) B = MAX_BATCHES;
    /* hold the GPU while the host queues everything, so launch overhead stays out of the timings */
    double spin_s = 15e-6 * R * B + 2e-4;
    if (spin_s > 0.03) spin_s = 0.03;
    spin_kernel<<<1, 1, 0, g_stream>>>((unsigned long long)(spin_s * 1e9));
    CKLAUNCH();
    for (int b = 0; b < B; b++) {
        CK(cudaEventRecord(g_ev[b], g_stream));
        for (int i = 0; i < R; i++)
            if (fn(ctx, iter++)) return r;
    }
    CK(cudaEventRecord(g_ev[B], g_stream));
    CK(cudaEventSynchronize(g_ev[B]));
    double per[MAX_BATCHES];
    for (int b = 0; b < B; b++) {
        CK(cudaEventElapsedTime(&ms, g_ev[b], g_ev[b + 1]));
        per[b] = 1e-3 * (double)ms / R;
    }
    qsort(per, (size_t)B, sizeof(double), cmp_double);
    r.time_s = (B % 2) ? per[B / 2] : 0.5 * (per[B / 2 - 1] + per[B / 2]);
    r.reps = R * B;
    r.ok = r.time_s > 0.0;
    return r;
}

/* ------------------------------------------------------------------------------------------------ */
/* cuBLASLt GEMM: y[M,N] = x[M,K] * W[N,K]^T (PyTorch's F.linear, "TN" in column-major terms:        */
/* cuBLAS m = N, n = M, k = K, op(A) = T with A = W stored K x N, op(B) = N with B = x stored K x M). */
/* ------------------------------------------------------------------------------------------------ */

enum { DT_BF16 = 0, DT_FP8 = 1 };
static const char *dtype_name[2] = {"bf16", "fp8"};

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

static cublasLtHandle_t g_lt;
static void *g_lt_ws;
static float *g_d_one; /* device 1.0f: fp8 A/B scale */

typedef struct {
    int dtype;
    long long m, n, k; /* tokens, output features, input features */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    /* buffer pools and rotation (so that repeated launches do not re-hit L2 with the same operands) */
    char *pa, *pb, *pc;
    size_t sa, sb, sc; /* bytes per operand, rounded to 256 */
    int ra, rb, rc;    /* number of rotation slots */
    float alpha, beta;
    char err[160];
} gemm_t;

static void gemm_destroy(gemm_t *g) {
    if (g->la) cublasLtMatrixLayoutDestroy(g->la);
    if (g->lb) cublasLtMatrixLayoutDestroy(g->lb);
    if (g->lc) cublasLtMatrixLayoutDestroy(g->lc);
    if (g->op) cublasLtMatmulDescDestroy(g->op);
    g->la = g->lb = g->lc = NULL;
    g->op = NULL;
}

#define LTTRY(call)                                                                                 \
    do {                                                                                            \
        cublasStatus_t s_ = (call);                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
            snprintf(g->err, sizeof g->err, "%s: %s", #call, cublasLtGetStatusString(s_));          \
            g->err[sizeof g->err - 1] = 0;                                                          \
            return -1;                                                                              \
        }                                                                                           \
    } while (0)

static int slots(size_t cap, size_t sz) {
    size_t r = sz ? cap / sz : 1;
    if (r < 1) r = 1;
    if (r > 8) r = 8;
    return (int)r;
}

/* Create descriptors and pick cuBLASLt's first heuristic algorithm. Returns 0, or -1 with g->err set. */
static int gemm_setup(gemm_t *g, int dtype, long long m, long long n, long long k, void *pa, size_t capa, void *pb,
                      size_t capb, void *pc, size_t capc) {
    memset(g, 0, sizeof *g);
    g->dtype = dtype;
    g->m = m;
    g->n = n;
    g->k = k;
    g->alpha = 1.0f;
    g->beta = 0.0f;
    size_t es = dtype == DT_FP8 ? 1 : 2;
    g->sa = round_up((size_t)n * k * es, 256);
    g->sb = round_up((size_t)m * k * es, 256);
    g->sc = round_up((size_t)m * n * 2, 256);
    if (g->sa > capa || g->sb > capb || g->sc > capc) {
        snprintf(g->err, sizeof g->err, "operand larger than its buffer pool");
        return -1;
    }
    g->pa = (char *)pa;
    g->pb = (char *)pb;
    g->pc = (char *)pc;
    g->ra = slots(capa, g->sa);
    g->rb = slots(capb, g->sb);
    g->rc = slots(capc, g->sc);
    cudaDataType_t ab = dtype == DT_FP8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    LTTRY(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LTTRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LTTRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (dtype == DT_FP8) {
        LTTRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g_d_one, sizeof g_d_one));
        LTTRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g_d_one, sizeof g_d_one));
        int8_t fast = 1;
        LTTRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    LTTRY(cublasLtMatrixLayoutCreate(&g->la, ab, (uint64_t)k, (uint64_t)n, k));
    LTTRY(cublasLtMatrixLayoutCreate(&g->lb, ab, (uint64_t)k, (uint64_t)m, k));
    LTTRY(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, (uint64_t)n, (uint64_t)m, n));
    cublasLtMatmulPreference_t pref;
    LTTRY(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = LT_WORKSPACE_BYTES;
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    memset(&res, 0, sizeof res);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g_lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &res, &nres);
    cublasStatus_t st2 = cublasLtMatmulPreferenceDestroy(pref);
    LTTRY(st);
    LTTRY(st2);
    if (nres < 1) {
        snprintf(g->err, sizeof g->err, "cublasLtMatmulAlgoGetHeuristic: no algorithm");
        return -1;
    }
    g->algo = res.algo;
    return 0;
}

static int gemm_run(void *ctx, int iter) {
    gemm_t *g = (gemm_t *)ctx;
    const void *a = g->pa + (size_t)(iter % g->ra) * g->sa;
    const void *b = g->pb + (size_t)(iter % g->rb) * g->sb;
    void *c = g->pc + (size_t)(iter % g->rc) * g->sc;
    LTTRY(cublasLtMatmul(g_lt, g->op, &g->alpha, a, g->la, b, g->lb, &g->beta, c, g->lc, c, g->lc, &g->algo, g_lt_ws,
                         LT_WORKSPACE_BYTES, g_stream));
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Correctness checks against float64 CPU references                                                 */
/* ------------------------------------------------------------------------------------------------ */

static double host_bf16(bf16 v) { return (double)__bfloat162float(v); }

static double rel_err(const double *out, const double *ref, size_t n, int *nonfinite) {
    double num = 0.0, den = 0.0;
    *nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) (*nonfinite)++;
        double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (*nonfinite) return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* Run one GEMM of the sweep's kind at m = n = k = s and compare with a float64 CPU reference.
 * Returns the relative norm error, or a negative number if cuBLASLt refused the problem (err set). */
static double check_gemm(int dtype, int s, char *err, size_t errlen) {
    size_t es = dtype == DT_FP8 ? 1 : 2;
    size_t nel = (size_t)s * s;
    void *a = dmalloc(nel * es), *b = dmalloc(nel * es);
    bf16 *c = (bf16 *)dmalloc(nel * 2);
    if (dtype == DT_FP8) {
        fill_fp8((fp8 *)a, nel, 101, 1.0f);
        fill_fp8((fp8 *)b, nel, 102, 1.0f);
    } else {
        fill_bf16((bf16 *)a, nel, 101, 1.0f);
        fill_bf16((bf16 *)b, nel, 102, 1.0f);
    }
    CK(cudaMemsetAsync(c, 0xFF, nel * 2, g_stream)); /* poison: 0xFFFF is a bf16 NaN */
    gemm_t g;
    double result;
    if (gemm_setup(&g, dtype, s, s, s, a, nel * es, b, nel * es, c, nel * 2) || gemm_run(&g, 0)) {
        snprintf(err, errlen, "%s", g.err);
        result = -1.0;
    } else {
        CK(cudaStreamSynchronize(g_stream));
        unsigned char *ha = (unsigned char *)xmalloc(nel * es), *hb = (unsigned char *)xmalloc(nel * es);
        bf16 *hc = (bf16 *)xmalloc(nel * 2);
        CK(cudaMemcpy(ha, a, nel * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb, b, nel * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hc, c, nel * 2, cudaMemcpyDeviceToHost));
        double *da = (double *)xmalloc(nel * sizeof(double)), *db = (double *)xmalloc(nel * sizeof(double));
        double *out = (double *)xmalloc(nel * sizeof(double)), *ref = (double *)xmalloc(nel * sizeof(double));
        for (size_t i = 0; i < nel; i++) {
            if (dtype == DT_FP8) {
                da[i] = (double)(float)((const fp8 *)ha)[i];
                db[i] = (double)(float)((const fp8 *)hb)[i];
            } else {
                da[i] = host_bf16(((const bf16 *)ha)[i]);
                db[i] = host_bf16(((const bf16 *)hb)[i]);
            }
            out[i] = host_bf16(hc[i]);
        }
        /* C (n x m, column-major, ld n): C[i + j*n] = sum_k A[k + i*k] * B[k + j*k] */
        for (int j = 0; j < s; j++)
            for (int i = 0; i < s; i++) {
                double acc = 0.0;
                for (int kk = 0; kk < s; kk++) acc += da[kk + (size_t)i * s] * db[kk + (size_t)j * s];
                ref[i + (size_t)j * s] = acc;
            }
        int nf;
        result = rel_err(out, ref, nel, &nf);
        if (nf) snprintf(err, errlen, "%d non-finite outputs", nf);
        free(ha); free(hb); free(hc); free(da); free(db); free(out); free(ref);
    }
    gemm_destroy(&g);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    return result;
}

/* attention batched GEMMs (cuBLAS, bf16, fp32 compute), row-major Q, K, V [batch][seq][d]:
 *   S[b] = Q[b] K[b]^T  (row-major seq x seq);  O[b] = P[b] V[b]  (row-major seq x d) */
static cublasHandle_t g_blas;

static void attn_qk(const bf16 *q, const bf16 *k, bf16 *s, int batch, int seq, int d) {
    const float one = 1.0f, zero = 0.0f;
    CKB(cublasGemmStridedBatchedEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, seq, seq, d, &one, k, CUDA_R_16BF, d,
                                   (long long)seq * d, q, CUDA_R_16BF, d, (long long)seq * d, &zero, s, CUDA_R_16BF,
                                   seq, (long long)seq * seq, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void attn_pv(const bf16 *p, const bf16 *v, bf16 *o, int batch, int seq, int d) {
    const float one = 1.0f, zero = 0.0f;
    CKB(cublasGemmStridedBatchedEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, d, seq, seq, &one, v, CUDA_R_16BF, d,
                                   (long long)seq * d, p, CUDA_R_16BF, seq, (long long)seq * seq, &zero, o,
                                   CUDA_R_16BF, d, (long long)seq * d, batch, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

static bf16 *to_host_bf16(const bf16 *d, size_t n) {
    bf16 *h = (bf16 *)xmalloc(n * sizeof(bf16));
    CK(cudaMemcpy(h, d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    return h;
}

/* Check attention QK^T, softmax and PV (batch 2, seq 2048, d 64) against float64. Returns max rel err. */
static double check_attention(double errs[3]) {
    const int batch = 2, seq = 2048, d = 64;
    size_t nq = (size_t)batch * seq * d, ns = (size_t)batch * seq * seq;
    bf16 *q = (bf16 *)dmalloc(nq * 2), *k = (bf16 *)dmalloc(nq * 2), *v = (bf16 *)dmalloc(nq * 2);
    bf16 *s = (bf16 *)dmalloc(ns * 2), *p = (bf16 *)dmalloc(ns * 2), *o = (bf16 *)dmalloc(nq * 2);
    fill_bf16(q, nq, 201, 1.0f);
    fill_bf16(k, nq, 202, 1.0f);
    fill_bf16(v, nq, 203, 1.0f);
    CK(cudaMemsetAsync(s, 0xFF, ns * 2, g_stream));
    CK(cudaMemsetAsync(p, 0xFF, ns * 2, g_stream));
    CK(cudaMemsetAsync(o, 0xFF, nq * 2, g_stream));
    const float scale = 1.0f / sqrtf((float)d);
    attn_qk(q, k, s, batch, seq, d);
    launch_softmax(s, p, (long long)batch * seq, seq, scale);
    attn_pv(p, v, o, batch, seq, d);
    CK(cudaStreamSynchronize(g_stream));
    bf16 *hq = to_host_bf16(q, nq), *hk = to_host_bf16(k, nq), *hv = to_host_bf16(v, nq);
    bf16 *hs = to_host_bf16(s, ns), *hp = to_host_bf16(p, ns), *ho = to_host_bf16(o, nq);
    double *out = (double *)xmalloc(ns * sizeof(double)), *ref = (double *)xmalloc(ns * sizeof(double));
    int nf;
    double worst = 0.0;
    /* S = Q K^T */
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < seq; i++)
            for (int j = 0; j < seq; j++) {
                double acc = 0.0;
                const bf16 *qi = hq + ((size_t)b * seq + i) * d, *kj = hk + ((size_t)b * seq + j) * d;
                for (int c = 0; c < d; c++) acc += host_bf16(qi[c]) * host_bf16(kj[c]);
                size_t idx = ((size_t)b * seq + i) * seq + j;
                ref[idx] = acc;
                out[idx] = host_bf16(hs[idx]);
            }
    errs[0] = rel_err(out, ref, ns, &nf);
    /* P = softmax(scale * S) from the GPU's S */
    for (size_t r = 0; r < (size_t)batch * seq; r++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < seq; j++) mx = fmax(mx, scale * host_bf16(hs[r * seq + j]));
        for (int j = 0; j < seq; j++) sum += exp(scale * host_bf16(hs[r * seq + j]) - mx);
        for (int j = 0; j < seq; j++) {
            ref[r * seq + j] = exp(scale * host_bf16(hs[r * seq + j]) - mx) / sum;
            out[r * seq + j] = host_bf16(hp[r * seq + j]);
        }
    }
    errs[1] = rel_err(out, ref, ns, &nf);
    /* O = P V from the GPU's P */
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < seq; i++)
            for (int c = 0; c < d; c++) {
                double acc = 0.0;
                for (int j = 0; j < seq; j++)
                    acc += host_bf16(hp[((size_t)b * seq + i) * seq + j]) * host_bf16(hv[((size_t)b * seq + j) * d + c]);
                size_t idx = ((size_t)b * seq + i) * d + c;
                ref[idx] = acc;
                out[idx] = host_bf16(ho[idx]);
            }
    errs[2] = rel_err(out, ref, nq, &nf);
    for (int i = 0; i < 3; i++) worst = fmax(worst, isnan(errs[i]) ? INFINITY : errs[i]);
    free(hq); free(hk); free(hv); free(hs); free(hp); free(ho); free(out); free(ref);
    CK(cudaFree(q)); CK(cudaFree(k)); CK(cudaFree(v)); CK(cudaFree(s)); CK(cudaFree(p)); CK(cudaFree(o));
    return worst;
}

/* Check the elementwise and RMSNorm kernels. */
static void check_memkernels(double *e_axpb, double *e_rms) {
    const int rows = 64, hidden = 8192;
    size_t n = (size_t)rows * hidden;
    bf16 *x = (bf16 *)dmalloc(n * 2), *y = (bf16 *)dmalloc(n * 2), *w = (bf16 *)dmalloc(hidden * 2);
    fill_bf16(x, n, 301, 2.0f);
    fill_bf16(w, hidden, 302, 1.0f);
    CK(cudaMemsetAsync(y, 0xFF, n * 2, g_stream));
    const float sc = 1.5f, bb = 0.25f;
    launch_axpb(x, y, n / 8, sc, bb);
    CK(cudaStreamSynchronize(g_stream));
    bf16 *hx = to_host_bf16(x, n), *hy = to_host_bf16(y, n), *hw = to_host_bf16(w, hidden);
    double *out = (double *)xmalloc(n * sizeof(double)), *ref = (double *)xmalloc(n * sizeof(double));
    int nf;
    for (size_t i = 0; i < n; i++) {
        ref[i] = host_bf16(hx[i]) * sc + bb;
        out[i] = host_bf16(hy[i]);
    }
    *e_axpb = rel_err(out, ref, n, &nf);
    free(hy);
    CK(cudaMemsetAsync(y, 0xFF, n * 2, g_stream));
    launch_rmsnorm(x, w, y, rows, hidden);
    CK(cudaStreamSynchronize(g_stream));
    hy = to_host_bf16(y, n);
    for (int r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int c = 0; c < hidden; c++) ss += host_bf16(hx[(size_t)r * hidden + c]) * host_bf16(hx[(size_t)r * hidden + c]);
        double inv = 1.0 / sqrt(ss / hidden + 1e-6);
        for (int c = 0; c < hidden; c++) {
            size_t i = (size_t)r * hidden + c;
            ref[i] = host_bf16(hx[i]) * inv * host_bf16(hw[c]);
            out[i] = host_bf16(hy[i]);
        }
    }
    *e_rms = rel_err(out, ref, n, &nf);
    free(hx); free(hy); free(hw); free(out); free(ref);
    CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(w));
}

/* ------------------------------------------------------------------------------------------------ */
/* Shapes                                                                                            */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    int hidden, ffn, kv_dim; /* kv_dim = 0: multi-head attention (QKV N = 3h) */
} layer_cfg_t;

/* Layer shapes of real models: Llama-2-7B, Llama-3-8B, a 5120-wide GQA model, Llama-3-70B, GPT-3 175B,
 * Llama-3.1-405B, an 18432-wide GQA model (kv 8 x 192). */
static const layer_cfg_t LAYERS[] = {
    {4096, 11008, 0},     {4096, 14336, 1024},  {5120, 14336, 1024}, {8192, 28672, 1024},
    {12288, 49152, 0},    {16384, 53248, 1024}, {18432, 49152, 1536},
};
#define NLAYERS ((int)(sizeof LAYERS / sizeof LAYERS[0]))
static const int TPS[] = {1, 2, 4, 8};
static const long long MS[] = {1024, 2048, 4096, 8192, 16384, 32768};
#define VOCAB 128256

typedef struct {
    long long m, n, k;
    const char *op;
    int hidden, tp;
} shape_t;

static int add_shape(shape_t *v, int cnt, long long m, long long n, long long k, const char *op, int h, int t) {
    for (int i = 0; i < cnt; i++)
        if (v[i].m == m && v[i].n == n && v[i].k == k) return cnt;
    v[cnt].m = m;
    v[cnt].n = n;
    v[cnt].k = k;
    v[cnt].op = op;
    v[cnt].hidden = h;
    v[cnt].tp = t;
    return cnt + 1;
}

/* Every (N, K) pair of every layer config at every tensor-parallel degree gets two token counts M (one
 * small, one large, cycling so that all six M values occur); two configs (Llama-3-8B at tp 1,
 * Llama-3-70B at tp 8) get all six M values. */
static int build_shapes(shape_t *v, int cap) {
    int cnt = 0, pair = 0;
    static const long long MPAIR[3][2] = {{1024, 8192}, {2048, 16384}, {4096, 32768}};
    for (int li = 0; li < NLAYERS; li++) {
        const layer_cfg_t *L = &LAYERS[li];
        for (int ti = 0; ti < 4; ti++) {
            int t = TPS[ti], h = L->hidden;
            long long qkv = L->kv_dim ? (long long)(h + 2 * L->kv_dim) / t : 3LL * h / t;
            long long nk[5][2] = {{qkv, h}, {h, h / t}, {L->ffn / t, h}, {h, L->ffn / t}, {VOCAB / t, h}};
            static const char *ops[5] = {"qkv", "attn_out", "mlp_up", "mlp_down", "lm_head"};
            int dense = (li == 1 && t == 1) || (li == 3 && t == 8);
            for (int o = 0; o < 5; o++) {
                if (cnt + 8 > cap) die("shape table full");
                if (dense) {
                    for (int mi = 0; mi < 6; mi++) cnt = add_shape(v, cnt, MS[mi], nk[o][0], nk[o][1], ops[o], h, t);
                } else {
                    const long long *mp = MPAIR[pair % 3];
                    int before = cnt;
                    cnt = add_shape(v, cnt, mp[0], nk[o][0], nk[o][1], ops[o], h, t);
                    cnt = add_shape(v, cnt, mp[1], nk[o][0], nk[o][1], ops[o], h, t);
                    if (cnt > before) pair++;
                }
            }
        }
    }
    return cnt;
}

/* ------------------------------------------------------------------------------------------------ */
/* JSON output                                                                                       */
/* ------------------------------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

/* integer-valued counts (flop, bytes): exact up to 2^53 */
static void json_count(FILE *f, double x) {
    if (isfinite(x) && fabs(x) < 9007199254740992.0) fprintf(f, "%.0f", x);
    else json_num(f, x);
}

/* results */
typedef struct {
    int dtype;
    shape_t s;
    double time_s, flop_per_s, eff;
    int reps;
} gemm_res_t;

typedef struct {
    int dtype;
    shape_t s;
    char err[160];
} gemm_fail_t;

typedef struct {
    int batch, seq, head_dim;
    double qk_s, sm_s, pv_s, flop;
    int reps;
} attn_res_t;

typedef struct {
    const char *kind;
    size_t buffer_bytes;
    double bytes, time_s;
    int reps;
} mem_res_t;

/* ------------------------------------------------------------------------------------------------ */
/* Device identification and datasheet peaks                                                         */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const char *match; /* substring of the cudaDeviceProp name; the first entry that matches wins */
    const char *tag;
    double bf16, fp8, bw;
    const char *source;
} peak_t;

static const peak_t PEAKS[] = {
    {"H200 NVL", "h200-nvl", 835.5e12, 1670.5e12, 4.8e12,
     "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL): BF16 1,671 TFLOPS and FP8 3,341 TFLOPS with sparsity, halved "
     "for dense; GPU memory bandwidth 4.8 TB/s (HBM3e)"},
    {"H200", "h200", 989.4e12, 1978.9e12, 4.8e12,
     "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity, i.e. "
     "989.4 and 1978.9 TFLOP/s dense; GPU memory bandwidth 4.8 TB/s (HBM3e)"},
    {"H100 80GB HBM3", "h100-sxm", 989.4e12, 1978.9e12, 3.35e12,
     "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity, halved "
     "for dense; GPU memory bandwidth 3.35 TB/s"},
};

/* ------------------------------------------------------------------------------------------------ */
/* main                                                                                              */
/* ------------------------------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr,
            "usage: gpuprof -o OUT.json [--device TAG] [--peaks BF16,FP8,BW --peak-source TEXT] [--source TEXT]\n"
            "               [--quick] [--budget-s SECONDS]\n"
            "       gpuprof --list        print the GEMM shapes and an estimate of the run time (no GPU needed)\n");
}

typedef struct {
    double gemm_bf16_s, gemm_fp8_s, attn_s, mem_s;
} budgets_t;

int main(int argc, char **argv) {
    const char *out_path = NULL, *tag = NULL, *source = NULL, *peak_source = NULL;
    double pk_bf16 = 0, pk_fp8 = 0, pk_bw = 0;
    int list_only = 0, quick = 0;
    double budget_s = 330.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(a, "--device") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(a, "--source") && i + 1 < argc) source = argv[++i];
        else if (!strcmp(a, "--peak-source") && i + 1 < argc) peak_source = argv[++i];
        else if (!strcmp(a, "--peaks") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lf,%lf,%lf", &pk_bf16, &pk_fp8, &pk_bw) != 3) { usage(); return 2; }
        } else if (!strcmp(a, "--budget-s") && i + 1 < argc) budget_s = atof(argv[++i]);
        else if (!strcmp(a, "--list")) list_only = 1;
        else if (!strcmp(a, "--quick")) quick = 1;
        else { usage(); return 2; }
    }

    static shape_t shapes[1024];
    int nshapes = build_shapes(shapes, 1024);
    if (quick) nshapes = nshapes < 12 ? nshapes : 12;

    if (list_only) {
        /* estimate: per shape 3 ms of setup, warm-up + probe, then max(20 ms, 3 runs) */
        double est[2] = {0, 0}, rate[2] = {650e12, 1100e12};
        for (int i = 0; i < nshapes; i++) {
            double fl = 2.0 * shapes[i].m * shapes[i].n * shapes[i].k;
            for (int d = 0; d < 2; d++) {
                double t = fl / rate[d] + 5e-6;
                est[d] += 3e-3 + 2 * t + fmax(TARGET_S, 3 * t);
            }
            printf("%-9s h=%-5d tp=%d m=%-6lld n=%-6lld k=%-6lld gflop=%.1f\n", shapes[i].op, shapes[i].hidden,
                   shapes[i].tp, shapes[i].m, shapes[i].n, shapes[i].k, fl * 1e-9);
        }
        printf("%d shapes per dtype; estimated GEMM sweep time: bf16 %.0f s (at 650 TFLOP/s), fp8 %.0f s (at 1100)\n",
               nshapes, est[0], est[1]);
        return 0;
    }
    if (!out_path) { usage(); return 2; }

    double t_start = now_s();
    budgets_t bud;
    bud.gemm_bf16_s = 0.45 * budget_s;
    bud.gemm_fp8_s = 0.35 * budget_s;
    bud.attn_s = 0.08 * budget_s;
    bud.mem_s = 0.08 * budget_s;

    /* ---------------------------------------------------------------- device info */
    int dev = 0, ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 1) die("no CUDA device");
    CK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    int sm_clock_khz = 0, mem_clock_khz = 0, bus_bits = 0, drv = 0, rtv = 0;
    CK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, dev));
    CK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
    CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rtv));
    size_t lt_ver = cublasLtGetVersion();
    g_num_sms = prop.multiProcessorCount;
    printf("gpuprof: device %s, cc %d.%d, %d SMs, SM clock %d MHz (max), memory %.1f GiB, bus %d bit, L2 %d MiB\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, sm_clock_khz / 1000,
           (double)prop.totalGlobalMem / (1 << 30), bus_bits, prop.l2CacheSize >> 20);
    printf("gpuprof: driver %d, runtime %d, cuBLASLt %zu\n", drv, rtv, lt_ver);

    const peak_t *pk = NULL;
    for (size_t i = 0; i < sizeof PEAKS / sizeof PEAKS[0] && !pk; i++)
        if (strstr(prop.name, PEAKS[i].match)) pk = &PEAKS[i];
    if (pk_bf16 <= 0) {
        if (!pk) {
            fprintf(stderr, "gpuprof: no datasheet peaks known for '%s': pass --peaks BF16,FP8,BW --peak-source TEXT\n",
                    prop.name);
            return 2;
        }
        pk_bf16 = pk->bf16;
        pk_fp8 = pk->fp8;
        pk_bw = pk->bw;
        if (!peak_source) peak_source = pk->source;
    }
    if (!peak_source) peak_source = "given on the command line (--peaks)";
    char tagbuf[64];
    if (!tag) {
        if (pk) tag = pk->tag;
        else {
            size_t j = 0;
            for (const char *c = prop.name; *c && j + 1 < sizeof tagbuf; c++)
                tagbuf[j++] = isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '-';
            tagbuf[j] = 0;
            tag = tagbuf;
        }
    }

    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    for (int i = 0; i <= MAX_BATCHES; i++) CK(cudaEventCreate(&g_ev[i]));
    CKB(cublasLtCreate(&g_lt));
    CKB(cublasCreate(&g_blas));
    CKB(cublasSetStream(g_blas, g_stream));
    g_lt_ws = dmalloc(LT_WORKSPACE_BYTES);
    g_d_one = (float *)dmalloc(sizeof(float));
    {
        float one = 1.0f;
        CK(cudaMemcpy(g_d_one, &one, sizeof one, cudaMemcpyHostToDevice));
    }

    /* ---------------------------------------------------------------- correctness checks */
    int fail = 0, fp8_ok = 1;
    char err[160] = "";
    double e_bf16 = check_gemm(DT_BF16, 256, err, sizeof err);
    printf("check: bf16 GEMM 256x256x256 vs float64 CPU: rel err %.3e %s\n", e_bf16, err);
    if (!(e_bf16 >= 0.0 && e_bf16 <= 1e-2)) {
        fprintf(stderr, "gpuprof: FATAL: bf16 GEMM check FAILED (rel err %.3e > 1e-2) %s\n", e_bf16, err);
        return 3;
    }
    char fp8_err[160] = "";
    double e_fp8 = check_gemm(DT_FP8, 256, fp8_err, sizeof fp8_err);
    printf("check: fp8 GEMM 256x256x256 vs float64 CPU (on the e4m3 inputs): rel err %.3e %s\n", e_fp8, fp8_err);
    if (!(e_fp8 >= 0.0 && e_fp8 <= 1e-2)) {
        fprintf(stderr, "gpuprof: fp8 GEMM check FAILED (%s, rel err %.3e): fp8 sweep skipped\n", fp8_err, e_fp8);
        fp8_ok = 0;
        if (e_fp8 >= 0.0) fail = 1; /* fp8 ran but gave wrong numbers: a bug, not a missing feature */
    }
    double e_attn[3];
    double e_attn_w = check_attention(e_attn);
    printf("check: attention QK^T %.3e, softmax %.3e, PV %.3e (rel err vs float64)\n", e_attn[0], e_attn[1],
           e_attn[2]);
    if (!(e_attn_w <= 1e-2)) {
        fprintf(stderr, "gpuprof: FATAL: attention check FAILED\n");
        return 3;
    }
    double e_axpb, e_rms;
    check_memkernels(&e_axpb, &e_rms);
    printf("check: elementwise %.3e, rmsnorm %.3e (rel err vs float64)\n", e_axpb, e_rms);
    if (!(e_axpb <= 1e-2 && e_rms <= 1e-2)) {
        fprintf(stderr, "gpuprof: FATAL: memory kernel check FAILED\n");
        return 3;
    }

    /* ---------------------------------------------------------------- GEMM sweeps */
    gemm_res_t *gres = (gemm_res_t *)xmalloc(sizeof(gemm_res_t) * 2 * nshapes);
    gemm_fail_t *gfail = (gemm_fail_t *)xmalloc(sizeof(gemm_fail_t) * 2 * nshapes);
    int ngres = 0, ngfail = 0, skipped[2] = {0, 0};
    double repeat_diff[2] = {0.0, 0.0}; /* largest relative difference between two timings of one shape */
    for (int dt = 0; dt < 2; dt++) {
        if (dt == DT_FP8 && !fp8_ok) {
            skipped[dt] = nshapes;
            continue;
        }
        size_t es = dt == DT_FP8 ? 1 : 2;
        size_t capa = 0, capb = 0, capc = 0;
        for (int i = 0; i < nshapes; i++) {
            size_t a = (size_t)shapes[i].n * shapes[i].k * es, b = (size_t)shapes[i].m * shapes[i].k * es,
                   c = (size_t)shapes[i].m * shapes[i].n * 2;
            capa = a > capa ? a : capa;
            capb = b > capb ? b : capb;
            capc = c > capc ? c : capc;
        }
        capa = round_up(capa, 256);
        capb = round_up(capb, 256);
        capc = round_up(capc, 256);
        void *pa = dmalloc(capa), *pb = dmalloc(capb), *pc = dmalloc(capc);
        if (dt == DT_FP8) {
            fill_fp8((fp8 *)pa, capa, 11, 1.0f);
            fill_fp8((fp8 *)pb, capb, 12, 1.0f);
        } else {
            fill_bf16((bf16 *)pa, capa / 2, 11, 1.0f);
            fill_bf16((bf16 *)pb, capb / 2, 12, 1.0f);
        }
        fill_bf16((bf16 *)pc, capc / 2, 13, 1.0f);
        CK(cudaStreamSynchronize(g_stream));
        printf("gemm %s: %d shapes, pools A %.2f GiB, B %.2f GiB, C %.2f GiB\n", dtype_name[dt], nshapes,
               capa / 1073741824.0, capb / 1073741824.0, capc / 1073741824.0);
        double t0 = now_s(), limit = dt == DT_FP8 ? bud.gemm_fp8_s : bud.gemm_bf16_s;
        for (int i = 0; i < nshapes; i++) {
            const shape_t *s = &shapes[i];
            if (now_s() - t0 > limit) {
                skipped[dt] = nshapes - i;
                printf("gemm %s: time budget %.0f s spent: %d shapes skipped\n", dtype_name[dt], limit, skipped[dt]);
                break;
            }
            gemm_t g;
            timing_t tm = {0, 0.0, 0};
            int bad = gemm_setup(&g, dt, s->m, s->n, s->k, pa, capa, pb, capb, pc, capc);
            if (!bad) {
                tm = time_op(gemm_run, &g);
                bad = !tm.ok;
            }
            if (bad) {
                gemm_fail_t *f = &gfail[ngfail++];
                f->dtype = dt;
                f->s = *s;
                snprintf(f->err, sizeof f->err, "%s", g.err[0] ? g.err : "timing failed");
                printf("gemm %-4s %-9s m=%-6lld n=%-6lld k=%-6lld FAILED: %s\n", dtype_name[dt], s->op, s->m, s->n,
                       s->k, f->err);
                if (dt == DT_BF16) fail = 1;
            } else {
                gemm_res_t *r = &gres[ngres++];
                r->dtype = dt;
                r->s = *s;
                r->time_s = tm.time_s;
                r->flop_per_s = 2.0 * s->m * s->n * s->k / tm.time_s;
                r->eff = r->flop_per_s / (dt == DT_FP8 ? pk_fp8 : pk_bf16);
                r->reps = tm.reps;
                printf("gemm %-4s %-9s h=%-5d tp=%d m=%-6lld n=%-6lld k=%-6lld %10.3f us %7.1f TFLOP/s eff %.3f (%d reps)\n",
                       dtype_name[dt], s->op, s->hidden, s->tp, s->m, s->n, s->k, tm.time_s * 1e6,
                       r->flop_per_s * 1e-12, r->eff, tm.reps);
            }
            gemm_destroy(&g);
        }
        /* time a spread of shapes a second time: the spread between two timings of the same GEMM */
        for (int i = 0, j = 0; i < ngres; i++) {
            const gemm_res_t *r0 = &gres[i];
            if (r0->dtype != dt || (j++ % 25) != 0) continue;
            gemm_t g;
            if (gemm_setup(&g, dt, r0->s.m, r0->s.n, r0->s.k, pa, capa, pb, capb, pc, capc)) die(g.err);
            timing_t tm = time_op(gemm_run, &g);
            gemm_destroy(&g);
            if (!tm.ok) die("repeat timing failed");
            double d = fabs(tm.time_s - r0->time_s) / r0->time_s;
            repeat_diff[dt] = fmax(repeat_diff[dt], d);
            printf("gemm %-4s repeat m=%-6lld n=%-6lld k=%-6lld %10.3f us vs %10.3f us (%.1f%%)\n", dtype_name[dt],
                   r0->s.m, r0->s.n, r0->s.k, tm.time_s * 1e6, r0->time_s * 1e6, 100.0 * d);
        }
        fflush(stdout);
        CK(cudaFree(pa));
        CK(cudaFree(pb));
        CK(cudaFree(pc));
    }

    /* ---------------------------------------------------------------- attention as batched GEMMs */
    static const int ATT[][3] = {/* batch (= micro-batch x heads per GPU), seq, head_dim */
                                 {8, 2048, 128},  {32, 2048, 128}, {8, 4096, 128},  {32, 4096, 128},
                                 {8, 8192, 128},  {32, 8192, 128}, {16, 2048, 64},  {64, 2048, 64},
                                 {16, 4096, 64},  {64, 4096, 64},  {16, 8192, 64},  {64, 8192, 64}};
    const int natt = quick ? 2 : (int)(sizeof ATT / sizeof ATT[0]);
    attn_res_t ares[sizeof ATT / sizeof ATT[0]];
    int nares = 0, att_skipped = 0;
    {
        size_t maxq = 0, maxs = 0;
        for (int i = 0; i < natt; i++) {
            size_t q = (size_t)ATT[i][0] * ATT[i][1] * ATT[i][2], s = (size_t)ATT[i][0] * ATT[i][1] * ATT[i][1];
            maxq = q > maxq ? q : maxq;
            maxs = s > maxs ? s : maxs;
        }
        bf16 *q = (bf16 *)dmalloc(maxq * 2), *k = (bf16 *)dmalloc(maxq * 2), *v = (bf16 *)dmalloc(maxq * 2);
        bf16 *o = (bf16 *)dmalloc(maxq * 2), *S = (bf16 *)dmalloc(maxs * 2), *P = (bf16 *)dmalloc(maxs * 2);
        fill_bf16(q, maxq, 21, 1.0f);
        fill_bf16(k, maxq, 22, 1.0f);
        fill_bf16(v, maxq, 23, 1.0f);
        CK(cudaStreamSynchronize(g_stream));
        double t0 = now_s();
        for (int i = 0; i < natt; i++) {
            if (now_s() - t0 > bud.attn_s) {
                att_skipped = natt - i;
                break;
            }
            struct attctx {
                bf16 *q, *k, *v, *o, *S, *P;
                int batch, seq, d;
            } c = {q, k, v, o, S, P, ATT[i][0], ATT[i][1], ATT[i][2]};
            struct F {
                static int qk(void *x, int) {
                    attctx *a = (attctx *)x;
                    attn_qk(a->q, a->k, a->S, a->batch, a->seq, a->d);
                    return 0;
                }
                static int sm(void *x, int) {
                    attctx *a = (attctx *)x;
                    launch_softmax(a->S, a->P, (long long)a->batch * a->seq, a->seq, 1.0f / sqrtf((float)a->d));
                    return 0;
                }
                static int pv(void *x, int) {
                    attctx *a = (attctx *)x;
                    attn_pv(a->P, a->v, a->o, a->batch, a->seq, a->d);
                    return 0;
                }
            };
            timing_t a = time_op(F::qk, &c), b = time_op(F::sm, &c), d = time_op(F::pv, &c);
            if (!a.ok || !b.ok || !d.ok) die("attention timing failed");
            attn_res_t *r = &ares[nares++];
            r->batch = c.batch;
            r->seq = c.seq;
            r->head_dim = c.d;
            r->qk_s = a.time_s;
            r->sm_s = b.time_s;
            r->pv_s = d.time_s;
            r->flop = 4.0 * c.batch * (double)c.seq * c.seq * c.d;
            r->reps = a.reps + b.reps + d.reps;
            double tot = r->qk_s + r->sm_s + r->pv_s;
            printf("attention_bmm batch=%-3d seq=%-5d d=%-3d qk %8.1f us (%.3f) softmax %8.1f us (%.0f GB/s) pv %8.1f us "
                   "(%.3f) total eff %.3f\n",
                   c.batch, c.seq, c.d, r->qk_s * 1e6, 0.5 * r->flop / r->qk_s / pk_bf16, r->sm_s * 1e6,
                   4.0 * c.batch * (double)c.seq * c.seq / r->sm_s * 1e-9, r->pv_s * 1e6,
                   0.5 * r->flop / r->pv_s / pk_bf16, r->flop / tot / pk_bf16);
        }
        CK(cudaFree(q)); CK(cudaFree(k)); CK(cudaFree(v)); CK(cudaFree(o)); CK(cudaFree(S)); CK(cudaFree(P));
    }
    fflush(stdout);

    /* ---------------------------------------------------------------- memory-bound kernels */
    static const size_t MEMSZ_MIB[] = {16, 32, 64, 128, 256, 512, 1024, 2048};
    const int nmem = quick ? 2 : (int)(sizeof MEMSZ_MIB / sizeof MEMSZ_MIB[0]);
    mem_res_t mres[3 * (sizeof MEMSZ_MIB / sizeof MEMSZ_MIB[0])];
    int nmres = 0, mem_skipped = 0;
    {
        const size_t pool = (size_t)4 << 30;
        const int hidden = 8192;
        char *src = (char *)dmalloc(pool), *dst = (char *)dmalloc(pool);
        bf16 *w = (bf16 *)dmalloc(hidden * 2);
        fill_bf16((bf16 *)src, pool / 2, 31, 2.0f);
        fill_bf16((bf16 *)dst, pool / 2, 32, 2.0f);
        fill_bf16(w, hidden, 33, 1.0f);
        CK(cudaStreamSynchronize(g_stream));
        double t0 = now_s();
        for (int i = 0; i < nmem; i++) {
            for (int kind = 0; kind < 3; kind++) {
                if (now_s() - t0 > bud.mem_s) {
                    mem_skipped++;
                    continue;
                }
                struct memctx {
                    char *src, *dst;
                    bf16 *w;
                    size_t sz;
                    int rot, hidden;
                } c = {src, dst, w, MEMSZ_MIB[i] << 20, 0, hidden};
                c.rot = slots(pool, c.sz);
                struct F {
                    static int copy(void *x, int it) {
                        memctx *m = (memctx *)x;
                        size_t off = (size_t)(it % m->rot) * m->sz;
                        CK(cudaMemcpyAsync(m->dst + off, m->src + off, m->sz, cudaMemcpyDeviceToDevice, g_stream));
                        return 0;
                    }
                    static int axpb(void *x, int it) {
                        memctx *m = (memctx *)x;
                        size_t off = (size_t)(it % m->rot) * m->sz;
                        launch_axpb(m->src + off, m->dst + off, m->sz / 16, 1.0009765625f, 0.5f);
                        return 0;
                    }
                    static int rms(void *x, int it) {
                        memctx *m = (memctx *)x;
                        size_t off = (size_t)(it % m->rot) * m->sz;
                        launch_rmsnorm((const bf16 *)(m->src + off), m->w, (bf16 *)(m->dst + off),
                                       (int)(m->sz / (2 * (size_t)m->hidden)), m->hidden);
                        return 0;
                    }
                };
                static const char *kinds[3] = {"copy", "elementwise", "rmsnorm"};
                op_fn fns[3] = {F::copy, F::axpb, F::rms};
                timing_t tm = time_op(fns[kind], &c);
                if (!tm.ok) die("memory timing failed");
                mem_res_t *r = &mres[nmres++];
                r->kind = kinds[kind];
                r->buffer_bytes = c.sz;
                r->bytes = 2.0 * c.sz + (kind == 2 ? 2.0 * hidden : 0.0);
                r->time_s = tm.time_s;
                r->reps = tm.reps;
                printf("memory %-11s %6zu MiB %9.1f us %7.0f GB/s eff %.3f\n", r->kind, MEMSZ_MIB[i],
                       r->time_s * 1e6, r->bytes / r->time_s * 1e-9, r->bytes / r->time_s / pk_bw);
            }
        }
        CK(cudaFree(src)); CK(cudaFree(dst)); CK(cudaFree(w));
    }
    CK(cudaDeviceSynchronize());

    /* ---------------------------------------------------------------- JSON */
    char host[128] = "unknown-host", date[64] = "unknown-date", srcbuf[512];
    if (gethostname(host, sizeof host) != 0) strcpy(host, "unknown-host");
    host[sizeof host - 1] = 0;
    time_t tt = time(NULL);
    struct tm tmv;
    if (gmtime_r(&tt, &tmv)) strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (!source) {
        snprintf(srcbuf, sizeof srcbuf, "tools/gpuprof/run.sh on %s (%s), %s, driver %d, CUDA runtime %d, cuBLASLt %zu",
                 host, prop.name, date, drv, rtv, lt_ver);
        source = srcbuf;
    }
    char tmp_path[4096];
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", out_path);
    FILE *f = fopen(tmp_path, "w");
    if (!f) {
        perror(tmp_path);
        return 2;
    }
    fprintf(f, "{\"format\":\"autopar-profile/1\",\n \"device\":");
    json_str(f, tag);
    fprintf(f, ",\"device_name\":");
    json_str(f, prop.name);
    fprintf(f, ",\n \"source\":");
    json_str(f, source);
    fprintf(f, ",\n \"date\":");
    json_str(f, date);
    fprintf(f, ",\n \"peak_flop_per_s\":{\"bf16\":");
    json_num(f, pk_bf16);
    fprintf(f, ",\"fp8\":");
    json_num(f, pk_fp8);
    fprintf(f, "},\"mem_bw_Bps\":");
    json_num(f, pk_bw);
    fprintf(f, ",\n \"peak_source\":");
    json_str(f, peak_source);
    fprintf(f, ",\n \"device_info\":{\"name\":");
    json_str(f, prop.name);
    fprintf(f,
            ",\"compute_capability\":\"%d.%d\",\"sm_count\":%d,\"sm_clock_max_khz\":%d,\"mem_clock_max_khz\":%d,"
            "\"mem_bus_width_bits\":%d,\"l2_bytes\":%d,\"mem_total_bytes\":%zu,\"driver_version\":%d,"
            "\"runtime_version\":%d,\"cublaslt_version\":%zu},\n",
            prop.major, prop.minor, prop.multiProcessorCount, sm_clock_khz, mem_clock_khz, bus_bits, prop.l2CacheSize,
            prop.totalGlobalMem, drv, rtv, lt_ver);
    fprintf(f,
            " \"method\":{\"timing\":\"CUDA events; 1 warm-up and 1 probe run, then 3-15 batches of 1-32 back-to-back "
            "launches queued behind a GPU spin kernel (about %.0f ms per shape); time_s is the median over batches of "
            "batch time / launches\",\"data\":\"uniform random in [-1,1) (not zeros); operands rotate among up to 8 "
            "buffer copies so that repeated launches do not re-read them from L2\",\"gemm\":\"cuBLASLt, y[m,n] = "
            "x[m,k] W[n,k]^T (TN), first heuristic algorithm, %zu MiB workspace, fp32 accumulate; bf16: bf16 "
            "inputs and output; fp8: e4m3 inputs with per-tensor scale pointers (1.0), bf16 output, fast "
            "accumulation on\",\"attention_bmm\":\"cublasGemmStridedBatchedEx bf16, S = Q K^T and O = P V per (micro-batch "
            "x head), plus a row softmax kernel over S; non-causal; flop = 4 batch seq^2 head_dim\",\"memory\":\"bytes "
            "= bytes read + bytes written\"},\n",
            TARGET_S * 1e3, LT_WORKSPACE_BYTES >> 20);
    fprintf(f, " \"checks\":{\"bf16_gemm_256_rel_err\":");
    json_num(f, e_bf16);
    fprintf(f, ",\"fp8_gemm_256_rel_err\":");
    json_num(f, e_fp8 >= 0 ? e_fp8 : NAN);
    fprintf(f, ",\"attention_qk_rel_err\":");
    json_num(f, e_attn[0]);
    fprintf(f, ",\"attention_softmax_rel_err\":");
    json_num(f, e_attn[1]);
    fprintf(f, ",\"attention_pv_rel_err\":");
    json_num(f, e_attn[2]);
    fprintf(f, ",\"elementwise_rel_err\":");
    json_num(f, e_axpb);
    fprintf(f, ",\"rmsnorm_rel_err\":");
    json_num(f, e_rms);
    fprintf(f, ",\"tolerance\":0.01,\"gemm_bf16_repeat_max_rel_diff\":");
    json_num(f, repeat_diff[0]);
    fprintf(f, ",\"gemm_fp8_repeat_max_rel_diff\":");
    json_num(f, repeat_diff[1]);
    fprintf(f, "},\n");
    fprintf(f, " \"skipped\":{\"gemm_bf16\":%d,\"gemm_fp8\":%d,\"attention_bmm\":%d,\"memory\":%d},\n", skipped[0],
            skipped[1], att_skipped, mem_skipped);
    fprintf(f, " \"gemm\":[");
    for (int i = 0; i < ngres; i++) {
        const gemm_res_t *r = &gres[i];
        fprintf(f, "%s\n  {\"dtype\":\"%s\",\"op\":\"%s\",\"hidden\":%d,\"tp\":%d,\"m\":%lld,\"n\":%lld,\"k\":%lld,",
                i ? "," : "", dtype_name[r->dtype], r->s.op, r->s.hidden, r->s.tp, r->s.m, r->s.n, r->s.k);
        fprintf(f, "\"flop\":");
        json_count(f, 2.0 * r->s.m * r->s.n * r->s.k);
        fprintf(f, ",\"time_s\":");
        json_num(f, r->time_s);
        fprintf(f, ",\"flop_per_s\":");
        json_num(f, r->flop_per_s);
        fprintf(f, ",\"efficiency\":");
        json_num(f, r->eff);
        fprintf(f, ",\"reps\":%d}", r->reps);
    }
    fprintf(f, "],\n \"gemm_failures\":[");
    for (int i = 0; i < ngfail; i++) {
        const gemm_fail_t *r = &gfail[i];
        fprintf(f, "%s\n  {\"dtype\":\"%s\",\"op\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"error\":", i ? "," : "",
                dtype_name[r->dtype], r->s.op, r->s.m, r->s.n, r->s.k);
        json_str(f, r->err);
        fputc('}', f);
    }
    if (!fp8_ok) {
        fprintf(f, "%s\n  {\"dtype\":\"fp8\",\"op\":\"check\",\"m\":256,\"n\":256,\"k\":256,\"error\":", ngfail ? "," : "");
        json_str(f, fp8_err[0] ? fp8_err : "correctness check failed");
        fputc('}', f);
    }
    fprintf(f, "],\n \"attention_bmm\":[");
    for (int i = 0; i < nares; i++) {
        const attn_res_t *r = &ares[i];
        double tot = r->qk_s + r->sm_s + r->pv_s;
        fprintf(f, "%s\n  {\"dtype\":\"bf16\",\"batch\":%d,\"seq\":%d,\"head_dim\":%d,\"causal\":false,\"flop\":",
                i ? "," : "", r->batch, r->seq, r->head_dim);
        json_count(f, r->flop);
        fprintf(f, ",\"time_s\":");
        json_num(f, tot);
        fprintf(f, ",\"flop_per_s\":");
        json_num(f, r->flop / tot);
        fprintf(f, ",\"efficiency\":");
        json_num(f, r->flop / tot / pk_bf16);
        fprintf(f, ",\"qk_time_s\":");
        json_num(f, r->qk_s);
        fprintf(f, ",\"softmax_time_s\":");
        json_num(f, r->sm_s);
        fprintf(f, ",\"pv_time_s\":");
        json_num(f, r->pv_s);
        fprintf(f, ",\"softmax_bytes\":");
        json_count(f, 4.0 * r->batch * (double)r->seq * r->seq);
        fprintf(f, ",\"reps\":%d}", r->reps);
    }
    fprintf(f, "],\n \"memory\":[");
    for (int i = 0; i < nmres; i++) {
        const mem_res_t *r = &mres[i];
        fprintf(f, "%s\n  {\"kind\":\"%s\",\"buffer_bytes\":%zu,\"bytes\":", i ? "," : "", r->kind, r->buffer_bytes);
        json_count(f, r->bytes);
        fprintf(f, ",\"time_s\":");
        json_num(f, r->time_s);
        fprintf(f, ",\"bw_Bps\":");
        json_num(f, r->bytes / r->time_s);
        fprintf(f, ",\"efficiency\":");
        json_num(f, r->bytes / r->time_s / pk_bw);
        fprintf(f, ",\"reps\":%d}", r->reps);
    }
    fprintf(f, "]}\n");
    if (fclose(f) != 0) {
        perror(tmp_path);
        return 2;
    }
    if (rename(tmp_path, out_path) != 0) {
        perror(out_path);
        return 2;
    }

    /* ---------------------------------------------------------------- summary */
    int over = 0;
    for (int i = 0; i < ngres; i++) over += gres[i].eff > 1.0 || !(gres[i].eff > 0.0);
    for (int i = 0; i < nmres; i++) over += mres[i].bytes / mres[i].time_s / pk_bw > 1.0;
    printf("\nsummary (%s, %s): %d GEMM results, %d failures, %d attention, %d memory; %.0f s\n", prop.name, tag, ngres,
           ngfail, nares, nmres, now_s() - t_start);
    for (int dt = 0; dt < 2; dt++) {
        double e[1024];
        int n = 0;
        for (int i = 0; i < ngres; i++)
            if (gres[i].dtype == dt && n < 1024) e[n++] = gres[i].eff;
        if (!n) continue;
        qsort(e, (size_t)n, sizeof(double), cmp_double);
        printf("  gemm %-4s efficiency: min %.3f  median %.3f  max %.3f  (%d shapes, %d skipped)\n", dtype_name[dt],
               e[0], e[n / 2], e[n - 1], n, skipped[dt]);
    }
    for (int i = 0; i < nmres; i++)
        if (mres[i].buffer_bytes == ((size_t)1 << 30))
            printf("  memory %-11s 1 GiB: %.0f GB/s (eff %.3f)\n", mres[i].kind, mres[i].bytes / mres[i].time_s * 1e-9,
                   mres[i].bytes / mres[i].time_s / pk_bw);
    if (over) printf("  WARNING: %d efficiencies outside (0, 1]: check the datasheet peaks\n", over);
    printf("wrote %s\n", out_path);
    free(gres);
    free(gfail);
    cublasLtDestroy(g_lt);
    cublasDestroy(g_blas);
    return fail ? 3 : 0;
}
