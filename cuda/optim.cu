// optim.cu: fused multi-tensor optimizer updates (SGD, Momentum, Adam/AdamW) on fp32 master
// weights that also write the low-precision parameter (optimize-cast), and that skip
// themselves on the device when the gradients overflowed, so the host never waits.
//
// ONE launch updates every parameter of one (optimizer kind, param dtype T, grad dtype G)
// bucket. Each tensor t's learning rate is read from the device, computed in double and
// rounded once (AdamW's decay factor likewise, from its coefficient t.decay):
//
//     lr = float(*base_lr * t.lr_ratio);   decay = float(1 - (*base_lr * t.lr_ratio) * t.decay)
//
// and for each element i, all arithmetic in float32:
//
//     p = t.master ? master[i] : float(param[i])     // no master: the param is its own
//     g = float(grad[i]) * t.grad_scale              // Momentum's rescale_grad, else 1
//     if (t.l2 != 0) g = g + t.l2 * p                // L2Decay, fused as Paddle's momentum
//     ...the optimizer's step on p and its float32 state...
//     if (t.master) master[i] = p
//     param[i] = T(p)                                // optimize-cast, round to nearest even
//
//   sgd_step:       p = p - lr * g
//   momentum_step:  v = v * mu + g
//                   p = p - lr * (g + mu * v)  with Nesterov,  else  p = p - lr * v
//   adam_step:      p = p * decay                    // AdamW only (t.decay != 0)
//                   m = m * beta1 + (1 - beta1) * g
//                   v = v * beta2 + (1 - beta2) * (g * g)
//                   root = sqrt(1 - beta2_pow);  lr_t = lr * root / (1 - beta1_pow)
//                   p = p - lr_t * (m / (sqrt(v) + epsilon * root))
//                   then, once per tensor: beta1_pow *= beta1; beta2_pow *= beta2
//
// found_inf (bool [1], written by amp.cu's unscale_and_check): when it is set every block
// returns before touching memory, so parameters, masters, moments and beta pows stay
// bit-identical (in place, "copy-through" is simply not writing). The flag never travels
// to the host.
//
// Bit-exactness. The NumPy twin (named at the end of this comment) rounds after every
// * + - / and sqrt, in exactly the order written above; the loader compiles this file with
// --fmad=false so that no multiply and add are contracted into an FMA, and '/' and sqrtf are
// IEEE round-to-nearest (the default without --use_fast_math). The kernel is memory-bound, so
// the lost FMAs cost nothing. Every scalar is rounded to float32 the way NumPy rounds a
// Python float: 1 - beta1 on the host; lr and 1 - lr * coeff here, in double, rounded once
// (the host computes the same doubles for the twin). (Multiplying by a grad_scale of exactly
// 1 changes no bits, so the kernel does it unconditionally where the twin skips it.)
//
// The learning rate is read from device memory (base_lr, a double [1] that the optimizer
// writes when it changes): a CUDA graph that captured this launch then uses the lr of each
// replay, not the one of the capture.
//
// The tables (multi_tensor_apply style). The launcher packs one int64 buffer on the host and
// uploads it once per set of tensors (kernels.device_table keeps it on the device; the next
// step, with the same tensors, reuses it):
//     TensorArgs[n]   pointers, size and per-tensor scalars of each tensor (88 bytes each)
//     int2[C]         chunk c -> (tensor, chunk index within it); block c updates elements
//                     [index * kChunk, min((index + 1) * kChunk, size)) of that tensor
//     unsigned int    blocks_done, Adam's ticket counter (see advance_beta_pows): 0 between
//                     launches (uploaded as 0; the last block of each launch resets it)
// Empty tensors get no chunk; when every tensor is empty the launcher sends one chunk of an
// empty tensor, so that Adam's beta pows still advance, as the twin's do.
// Inside a chunk each thread handles kVec consecutive elements per iteration, with one
// vector load/store per array when the tensor's pointers are aligned to the vector size
// (chunk starts keep that alignment: kChunk is a multiple of kVec), else element by element.
//
// Launch: grid (C,), block (kThreads,). Kernels (name expressions, T/G in {__half,
// __nv_bfloat16, float}):
//     sgd_step<T, G>(tensors, chunks, found_inf, base_lr)
//     momentum_step<T, G>(tensors, chunks, found_inf, base_lr, float mu, int nesterov)
//     adam_step<T, G>(tensors, chunks, int n_tensors, unsigned* blocks_done, found_inf,
//                     base_lr, float beta1, float beta2, float one_minus_beta1,
//                     float one_minus_beta2, float epsilon)
// compiled for (T, G) = (__half, __half), (__half, float), (__nv_bfloat16, __nv_bfloat16),
// (__nv_bfloat16, float), (float, float). A bfloat16 parameter or gradient is a CuPy (>= 14)
// array of ml_dtypes.bfloat16; its bytes are read as __nv_bfloat16, and the optimize-cast
// rounds with __float2bfloat16_rn (nearest even, as ml_dtypes' astype in the twin).
//
// Python caller: minitorch_amp/optimizer/bucket.py (Bucket._launch, through
// backend/fused_optim.launch: one launch per bucket of an optimizer step, on CuPy arrays when
// backend.kernels.enabled()). The table holds views into the bucket's flat master and state
// buffers, each segment starting at a multiple of 64 elements (aligned vector loads).
// NumPy twin (the specification): each optimizer's own _update (and Adam's _advance) in
// minitorch_amp/optimizer/{sgd,momentum,adam}.py, run on the bucket's flat buffers by
// Bucket._twin, which is also the CPU path. tests/test_fused_optim_kernel.py holds this file
// to it bit for bit on a CPU emulator (tests/optim_emulator.cpp) and
// tests/test_fused_optim_gpu.py on the device.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// One tensor of the bucket, as fused_optim.TENSOR_ARGS packs it (fused_optim.table).
struct TensorArgs {
    void* param;        // T[size]
    float* master;      // float[size], or nullptr when the param is its own master
    const void* grad;   // G[size]
    float* state0;      // Momentum's velocity, Adam's moment1 (unused by SGD)
    float* state1;      // Adam's moment2
    float* beta1_pow;   // Adam's [1] accumulators
    float* beta2_pow;
    long long size;     // elements
    double lr_ratio;    // this tensor's lr is float(base_lr * lr_ratio) (group and param ratios)
    double decay;       // AdamW's decoupled coefficient, 0 for none
    float grad_scale;   // multiplies the gradient first (Momentum's rescale_grad)
    float l2;           // L2Decay coefficient, 0 for none
};
static_assert(sizeof(TensorArgs) == 88, "TensorArgs must match fused_optim.TENSOR_ARGS");

namespace {

constexpr long long kChunk = 65536;  // elements per block; fused_optim.CHUNK
constexpr int kThreads = 256;        // threads per block; fused_optim.THREADS
constexpr int kVec = 4;              // consecutive elements per thread per iteration

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename X> __device__ __forceinline__ X from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

// kVec elements of X moved as one aligned load/store (16 bytes of float, 8 of half).
template <typename X> struct alignas(sizeof(X) * kVec) Vec {
    X v[kVec];
};

template <typename X> __device__ __forceinline__ bool aligned(const void* ptr)
{
    return reinterpret_cast<unsigned long long>(ptr) % sizeof(Vec<X>) == 0;
}

// r[k] = src[i + k] for k < n (n <= kVec elements left in the chunk); zero beyond.
template <typename X>
__device__ __forceinline__ void load(float (&r)[kVec], const X* src, long long i, int n, bool vec)
{
    if (vec && n == kVec) {
        const Vec<X> x = *reinterpret_cast<const Vec<X>*>(src + i);
#pragma unroll
        for (int k = 0; k < kVec; ++k) r[k] = to_float(x.v[k]);
    } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) r[k] = k < n ? to_float(src[i + k]) : 0.0f;
    }
}

template <typename X>
__device__ __forceinline__ void store(X* dst, const float (&r)[kVec], long long i, int n, bool vec)
{
    if (vec && n == kVec) {
        Vec<X> x;
#pragma unroll
        for (int k = 0; k < kVec; ++k) x.v[k] = from_float<X>(r[k]);
        *reinterpret_cast<Vec<X>*>(dst + i) = x;
    } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
            if (k < n) dst[i + k] = from_float<X>(r[k]);
        }
    }
}

// The part every kernel shares: walk this block's chunk, load p, g and kStates state arrays,
// prepare g, call step(p, g, s0, s1) per element, store everything back.
template <typename T, typename G, int kStates, typename Step>
__device__ __forceinline__ void update_chunk(const TensorArgs& t, int chunk, const Step& step)
{
    const long long begin = static_cast<long long>(chunk) * kChunk;
    const long long end = t.size < begin + kChunk ? t.size : begin + kChunk;
    T* param = static_cast<T*>(t.param);
    const G* grad = static_cast<const G*>(t.grad);
    const bool vec = aligned<T>(param) && aligned<G>(grad) && aligned<float>(t.master) &&
                     aligned<float>(t.state0) && aligned<float>(t.state1);
    for (long long i = begin + static_cast<long long>(threadIdx.x) * kVec; i < end;
         i += static_cast<long long>(blockDim.x) * kVec) {
        const int n = end - i < kVec ? static_cast<int>(end - i) : kVec;
        float p[kVec], g[kVec], s0[kVec] = {}, s1[kVec] = {};
        if (t.master != nullptr) {
            load(p, t.master, i, n, vec);
        } else {
            load(p, param, i, n, vec);
        }
        load(g, grad, i, n, vec);
        if (kStates > 0) load(s0, t.state0, i, n, vec);
        if (kStates > 1) load(s1, t.state1, i, n, vec);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
            float gk = g[k] * t.grad_scale;
            if (t.l2 != 0.0f) gk = gk + t.l2 * p[k];
            step(p[k], gk, s0[k], s1[k]);
        }
        if (t.master != nullptr) store(t.master, p, i, n, vec);
        store(param, p, i, n, vec);
        if (kStates > 0) store(t.state0, s0, i, n, vec);
        if (kStates > 1) store(t.state1, s1, i, n, vec);
    }
}

// This tensor's learning rate, the double product rounded once to float (as the twin does).
__device__ __forceinline__ float tensor_lr(const TensorArgs& t, const double* base_lr)
{
    return static_cast<float>(*base_lr * t.lr_ratio);
}

// Adam's beta pows may change only after every block has read them. Each block takes a
// ticket when it is done; the block that takes the last one advances every tensor's pows
// (the threadfence-reduction pattern) and sets blocks_done back to 0 for the next launch
// (the table stays on the device from step to step).
__device__ __forceinline__ void advance_beta_pows(const TensorArgs* tensors, int n_tensors,
                                                  unsigned int* blocks_done, float beta1,
                                                  float beta2)
{
    __shared__ bool last;
    __syncthreads();  // every thread of this block is past its reads of the pows
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    if (threadIdx.x == 0) *blocks_done = 0u;  // every other block has taken its ticket
    for (int j = threadIdx.x; j < n_tensors; j += blockDim.x) {
        float* b1 = tensors[j].beta1_pow;
        float* b2 = tensors[j].beta2_pow;
        *b1 = *b1 * beta1;
        *b2 = *b2 * beta2;
    }
}

}  // namespace

template <typename T, typename G>
__global__ void __launch_bounds__(kThreads)
    sgd_step(const TensorArgs* tensors, const int2* chunks, const bool* found_inf,
             const double* base_lr)
{
    if (*found_inf) return;  // overflow: leave everything exactly as it was
    const int2 c = chunks[blockIdx.x];
    const TensorArgs t = tensors[c.x];
    const float lr = tensor_lr(t, base_lr);
    update_chunk<T, G, 0>(t, c.y, [&](float& p, float g, float&, float&) { p = p - lr * g; });
}

template <typename T, typename G>
__global__ void __launch_bounds__(kThreads)
    momentum_step(const TensorArgs* tensors, const int2* chunks, const bool* found_inf,
                  const double* base_lr, float mu, int nesterov)
{
    if (*found_inf) return;
    const int2 c = chunks[blockIdx.x];
    const TensorArgs t = tensors[c.x];
    const float lr = tensor_lr(t, base_lr);
    update_chunk<T, G, 1>(t, c.y, [&](float& p, float g, float& v, float&) {
        v = v * mu + g;
        p = nesterov ? p - lr * (g + mu * v) : p - lr * v;
    });
}

template <typename T, typename G>
__global__ void __launch_bounds__(kThreads)
    adam_step(const TensorArgs* tensors, const int2* chunks, int n_tensors,
              unsigned int* blocks_done, const bool* found_inf, const double* base_lr,
              float beta1, float beta2, float one_minus_beta1, float one_minus_beta2,
              float epsilon)
{
    if (*found_inf) return;  // the beta pows do not advance either
    const int2 c = chunks[blockIdx.x];
    const TensorArgs t = tensors[c.x];
    const double lr64 = *base_lr * t.lr_ratio;
    const float decay = t.decay != 0.0 ? static_cast<float>(1.0 - lr64 * t.decay) : 1.0f;
    const float root = sqrtf(1.0f - *t.beta2_pow);
    const float lr_t = static_cast<float>(lr64) * root / (1.0f - *t.beta1_pow);
    const float eps_t = epsilon * root;
    update_chunk<T, G, 2>(t, c.y, [&](float& p, float g, float& m, float& v) {
        p = p * decay;
        m = m * beta1 + one_minus_beta1 * g;
        v = v * beta2 + one_minus_beta2 * (g * g);
        p = p - lr_t * (m / (sqrtf(v) + eps_t));
    });
    advance_beta_pows(tensors, n_tensors, blocks_done, beta1, beta2);
}

// The instantiations the loader names (NVRTC instantiates them from the name expressions;
// these make nvcc build them too, for the CI's register and spill check).
#define INSTANTIATE(T, G)                                                                       \
    template __global__ void sgd_step<T, G>(const TensorArgs*, const int2*, const bool*,       \
                                            const double*);                                    \
    template __global__ void momentum_step<T, G>(const TensorArgs*, const int2*, const bool*,  \
                                                 const double*, float, int);                   \
    template __global__ void adam_step<T, G>(const TensorArgs*, const int2*, int, unsigned int*, \
                                             const bool*, const double*, float, float, float,  \
                                             float, float);
INSTANTIATE(__half, __half)
INSTANTIATE(__half, float)
INSTANTIATE(__nv_bfloat16, __nv_bfloat16)
INSTANTIATE(__nv_bfloat16, float)
INSTANTIATE(float, float)
#undef INSTANTIATE
