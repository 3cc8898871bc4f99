// elementwise.cu: one-pass elementwise kernels of backend/primitives.py, grid-stride.
//
// relu_backward<T, G>: out = g * (y > 0) for y = relu(x), the gradient of ReLU.
//    y has dtype T, g and out dtype G; T and G are each __half, __nv_bfloat16, float or
//    double (all 16 pairs are compiled). Element i reads y[i] and g[i], writes out[i]:
//      - where y[i] > 0 (the unit is on), out[i] = g[i], every bit of it (g * 1 is g);
//      - elsewhere (y is +0, -0, negative or NaN), out[i] = g[i] * 0: a zero with g's sign,
//        and NaN when g[i] is inf or NaN.
//    NOTE: a multiply, not a select. An inf or NaN gradient where the unit is off stays NaN,
//    so the loss scaler still sees the overflow (Paddle's relu_grad does the same); a select
//    (y > 0 ? g : 0) would hide it as 0.
//    y > 0 is judged on y's bits (sign clear, not zero, not NaN), and the "on" branch passes
//    g's bits through untouched: CuPy compiles every kernel with -ftz=true, under which a
//    float32 comparison reads a subnormal y as 0 and a float32 multiply writes a subnormal g
//    as 0 (a bfloat16 subnormal is a float32 subnormal too). So the kernel gives the twin's
//    bits for every input; only a NaN's payload may differ (the GPU writes its own NaN).
//
//    Launch: grid (min(ceil(n / 256), 8192),), block (kBlock = 256,); each thread strides
//    over the n elements by the grid's size, so any grid covers any n. Args: y T [n],
//    g G [n], out G [n] (written), n int64. All three C-contiguous (a raw kernel sees bytes).
//
// Python caller: minitorch_amp/backend/primitives.py, relu_backward (on CuPy arrays, when
// backend.kernels.enabled(); MINITORCH_AMP_RAW_KERNELS=0 computes CuPy's own
// grad * (y > 0)).
// NumPy twin (the specification): relu_backward on NumPy arrays, grad * (y > 0).
//
// gelu_forward<T>: out = x * Phi(x), exact GELU, with Phi(x) = erfc(-x / sqrt(2)) / 2 (erfc
//    keeps Phi's relative precision far into the negative tail, where 1 + erf(x / sqrt(2))
//    would cancel). gelu_backward<T>: out = g * (Phi(x) + x * phi(x)), phi(x) =
//    exp(-x^2 / 2) / sqrt(2 pi), multiplied in the NumPy op's order: ((exp(x * x * -1/2) *
//    (1 / sqrt(2 pi))) * x + Phi(x)) * g. T is __half, __nv_bfloat16 or float: each value is
//    widened to float, every step is one float operation (no FMA contraction), and the
//    result is rounded to T once, where CuPy's expressions widened, computed and narrowed in
//    about five launches forward and eight backward. The op's twin computes Phi with its
//    own float32 polynomials (backend/special.py), CUDA's erfcf is within 4 ulps: the two
//    agree within a few float32 ulps, not bit for bit.
//    Launch: grid (min(ceil(n / 256), 8192),), block (256,), grid-stride as relu_backward.
//    Args: x T [n], (backward: g T [n],) out T [n] (written), n int64; C-contiguous.
// Python caller: minitorch_amp/backend/gelu.py (from activation.Gelu, approximate=False, on
// CuPy arrays). NumPy twin: activation.Gelu's forward and backward on NumPy arrays.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kBlock = 256;  // threads per block (the launcher's block size)

// y > 0, read from the bits: the sign bit is clear, the value is not +0, and it is not above
// +inf (a NaN). Subnormals count as positive, as they do in NumPy.
__device__ __forceinline__ bool positive(__half y)
{
    const unsigned short bits = __half_as_ushort(y);
    return bits != 0u && bits <= 0x7c00u;
}
__device__ __forceinline__ bool positive(__nv_bfloat16 y)
{
    const unsigned short bits = __bfloat16_as_ushort(y);
    return bits != 0u && bits <= 0x7f80u;
}
__device__ __forceinline__ bool positive(float y)
{
    const unsigned int bits = __float_as_uint(y);
    return bits != 0u && bits <= 0x7f800000u;
}
__device__ __forceinline__ bool positive(double y)
{
    const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(y));
    return bits != 0ull && bits <= 0x7ff0000000000000ull;
}

// g * 0 in G's arithmetic (16-bit floats through float, as CuPy computes them): +-0 with g's
// sign for a finite g, NaN for inf or NaN.
__device__ __forceinline__ __half times_zero(__half g)
{
    return __float2half_rn(__half2float(g) * 0.0f);
}
__device__ __forceinline__ __nv_bfloat16 times_zero(__nv_bfloat16 g)
{
    return __float2bfloat16_rn(__bfloat162float(g) * 0.0f);
}
__device__ __forceinline__ float times_zero(float g) { return g * 0.0f; }
__device__ __forceinline__ double times_zero(double g) { return g * 0.0; }

__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }

constexpr float kSqrtHalf = 0.70710678118654752f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

// Phi(v), the standard normal CDF.
__device__ __forceinline__ float normal_cdf(float v)
{
    return __fmul_rn(0.5f, erfcf(__fmul_rn(-v, kSqrtHalf)));
}

}  // namespace

template <typename T>
__global__ void __launch_bounds__(kBlock)
    gelu_forward(const T* __restrict__ x, T* __restrict__ out, long long n)
{
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const float v = widen(x[i]);
        store(out + i, __fmul_rn(v, normal_cdf(v)));
    }
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    gelu_backward(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ out,
                  long long n)
{
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const float v = widen(x[i]);
        const float density = __fmul_rn(expf(__fmul_rn(__fmul_rn(v, v), -0.5f)), kInvSqrt2Pi);
        const float slope = __fadd_rn(__fmul_rn(density, v), normal_cdf(v));
        store(out + i, __fmul_rn(slope, widen(g[i])));
    }
}

#define MINITORCH_GELU(T)                                                                   \
    template __global__ void gelu_forward<T>(const T* __restrict__, T* __restrict__,       \
                                             long long);                                   \
    template __global__ void gelu_backward<T>(const T* __restrict__, const T* __restrict__, \
                                              T* __restrict__, long long);
MINITORCH_GELU(__half)
MINITORCH_GELU(__nv_bfloat16)
MINITORCH_GELU(float)
#undef MINITORCH_GELU

template <typename T, typename G>
__global__ void __launch_bounds__(kBlock)
    relu_backward(const T* __restrict__ y, const G* __restrict__ g, G* __restrict__ out,
                  long long n)
{
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        out[i] = positive(y[i]) ? g[i] : times_zero(g[i]);
    }
}

// Every (T, G) pair, instantiated explicitly so that nvcc builds (and CI checks) them too;
// the loader names the same instantiations in its name expressions.
#define MINITORCH_RELU_BACKWARD(T, G)                                                          \
    template __global__ void relu_backward<T, G>(const T* __restrict__, const G* __restrict__, \
                                                 G* __restrict__, long long);
#define MINITORCH_RELU_BACKWARD_FOR_Y(T)     \
    MINITORCH_RELU_BACKWARD(T, __half)        \
    MINITORCH_RELU_BACKWARD(T, __nv_bfloat16) \
    MINITORCH_RELU_BACKWARD(T, float)         \
    MINITORCH_RELU_BACKWARD(T, double)
MINITORCH_RELU_BACKWARD_FOR_Y(__half)
MINITORCH_RELU_BACKWARD_FOR_Y(__nv_bfloat16)
MINITORCH_RELU_BACKWARD_FOR_Y(float)
MINITORCH_RELU_BACKWARD_FOR_Y(double)
#undef MINITORCH_RELU_BACKWARD_FOR_Y
#undef MINITORCH_RELU_BACKWARD
