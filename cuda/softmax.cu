// softmax.cu: softmax over the last axis of a float32 [rows, n] array, forward and backward,
// one launch each, where CuPy's array expressions take about five and four.
//
// softmax_forward: for each row, m = max(x) (NaN skipped, as NumPy's fmax: a NaN still makes
//   its row NaN through exp and the sum), e = exp(x - m), s = sum(e), y = e / s: each step one
//   IEEE float32 operation rounded to nearest, in the op's order (a division, not a multiply
//   by 1 / s). A row of -inf only is NaN (-inf - -inf), as in the op.
// softmax_backward: dx = (g - sum(g * y)) * y per row, y the forward's output.
// T, the input's (and the gradient's) dtype: float, __half or __nv_bfloat16. A 16-bit x is
//   widened exactly as it is read; y is always float32 (the op keeps it for the backward),
//   and the forward also writes out = T(y) when out is not null; the backward reads a T
//   gradient widened exactly and writes dx rounded once to T. So an AMP step's float16
//   scores take one launch each way where the widening, the kernel and the narrowing took
//   three, with the bits of those three.
//
// ORDER (deterministic: the shape alone decides it): thread t's running sum (or maximum) of
//   elements t, t + 256, ... in order, then a tree over the 256 partials in shared memory
//   (stride 128, 64, ..., 1). The NumPy op sums with BLAS in another order: the two agree
//   within float32 rounding, not bit for bit.
//
// LAUNCH: grid (min(rows, 8192),), block (256,); blocks stride over the rows. rows, n >= 1.
// DTYPES: x, g, out, dx T; y float32; all C-contiguous; rows, n int32.
//
// Python caller: minitorch_amp/backend/softmax.py (from activation.Softmax along the last axis
// of CuPy float32 arrays, when backend.kernels.enabled()). NumPy twin (the specification):
// activation.Softmax on NumPy arrays. HOST EMULATION: tests/softmax_emulator.cpp runs this
// file on the CPU through the real launcher (tests/test_softmax_kernel.py).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kThreads = 256;  // threads per block (the launcher's block size)

// The tree of the header's ORDER over every thread's v, with `op`; all threads get the result.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* partial, Op op)
{
    const int t = static_cast<int>(threadIdx.x);
    partial[t] = v;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] = op(partial[t], partial[t + stride]);
        __syncthreads();
    }
    const float total = partial[0];
    __syncthreads();  // partial is free again for the next reduction
    return total;
}

struct Add {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

struct Max {  // NaN skipped, as fmaxf and NumPy's fmax do
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// x (and g) as float: exact for every T; the one rounding to T of a float32 result.
__device__ __forceinline__ float wide(float v) { return v; }
__device__ __forceinline__ float wide(__half v) { return __half2float(v); }
__device__ __forceinline__ float wide(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

}  // namespace

template <typename T>
__global__ void softmax_forward(const T* x, float* y, T* out, int rows, int n)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        const T* xr = x + static_cast<long long>(row) * n;
        float* yr = y + static_cast<long long>(row) * n;
        float m = -__int_as_float(0x7f800000);  // -inf: the maximum of nothing yet
        for (int i = t; i < n; i += kThreads) m = fmaxf(m, wide(xr[i]));
        m = block_reduce(m, partial, Max());
        float s = 0.0f;
        for (int i = t; i < n; i += kThreads) {
            const float e = expf(__fsub_rn(wide(xr[i]), m));
            yr[i] = e;
            s = __fadd_rn(s, e);
        }
        s = block_reduce(s, partial, Add());
        for (int i = t; i < n; i += kThreads) {
            yr[i] = __fdiv_rn(yr[i], s);
            if (out != nullptr) store(out + static_cast<long long>(row) * n + i, yr[i]);
        }
    }
}

template <typename T>
__global__ void softmax_backward(const float* y, const T* g, T* dx, int rows, int n)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        const long long start = static_cast<long long>(row) * n;
        float s = 0.0f;
        for (int i = t; i < n; i += kThreads) {
            s = __fadd_rn(s, __fmul_rn(wide(g[start + i]), y[start + i]));
        }
        s = block_reduce(s, partial, Add());
        for (int i = t; i < n; i += kThreads) {
            store(dx + start + i, __fmul_rn(__fsub_rn(wide(g[start + i]), s), y[start + i]));
        }
    }
}

#define MINITORCH_SOFTMAX(T)                                                                \
    template __global__ void softmax_forward<T>(const T*, float*, T*, int, int);            \
    template __global__ void softmax_backward<T>(const float*, const T*, T*, int, int);
MINITORCH_SOFTMAX(float)
MINITORCH_SOFTMAX(__half)
MINITORCH_SOFTMAX(__nv_bfloat16)
#undef MINITORCH_SOFTMAX
