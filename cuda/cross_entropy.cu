// cross_entropy.cu: softmax cross-entropy with integer labels over the last axis of a
// [rows, n] array of logits, in two launches forward and one backward, where CuPy's array
// expressions take about 29 and 8 (the label checks, log_softmax's six steps, the pick, the
// weights, the sums and the mean's division, the backward's one-hot and products).
//
// cross_entropy_forward: for each row r with label y = label[r] and its logits x (widened
//   exactly from T as read):
//     m = max(x) (NaN skipped, as fmaxf: a NaN still makes its row NaN through exp and the
//     sum), s = sum(exp(x - m)), lse = log(s);
//     valid = y != ignore_index and 0 <= y < n; bad = y != ignore_index and not valid, which
//     sets *bad (a persistent device flag, read at the next host read: backend/sync.py);
//     safe = valid ? y : 0, picked = (x[safe] - m) - lse;
//     w = weight[safe] * valid (valid, 1 or 0, without a weight), loss = -picked * w;
//   and writes row_max, row_lse, row_weight and loss [rows] (float32): the backward needs the
//   first three, not the log-softmax matrix.
// cross_entropy_reduce: total = sum(loss), den = sum(row_weight); mean: scale = 1 / (den, or
//   1 when den is 0: all ignored gives 0, not NaN), *scale written, out = total * scale;
//   sum: out = total. out is rounded once to T.
// cross_entropy_backward: dx[r, i] = (exp((x - m) - lse) - (i == safe)) * (g * scale * w),
//   g = grad[r * grad_stride] (grad_stride 0: one gradient for a mean or a sum; 1: reduction
//   'none'), scale = *scale (1 when null), each product in that order; dx rounded once to T.
// Every step is one IEEE float32 operation rounded to nearest, in the NumPy op's order, so
// the only differences from the twin are expf / logf's last bits (CUDA's expf is within 2
// ulp, logf within 1) and the order of the sums; under CuPy's -ftz a subnormal exp is 0.
//
// ORDER (deterministic: the shape alone decides it): a row's maximum and sum as softmax.cu's:
//   thread t's running value over elements t, t + 256, ... in order, then a tree over the 256
//   partials in shared memory (stride 128, 64, ..., 1). The reduction: thread t adds loss (and
//   row_weight) t, t + 256, ... in order, then the same tree. The NumPy op sums pairwise (and
//   log-softmax's rows with its own reduction): the two agree within float32 rounding, not
//   bit for bit; tests/test_cross_entropy_kernel.py holds each row's loss to the twin's within
//   (16 + ceil(n / 256)) * 2**-24 * (|loss| + w * (|lse| + 1)), and each element of the
//   gradient within (16 + ceil(n / 256) + |lse|) * 2**-24 * |g * scale * w| + 2**-126 (an exp
//   flushed to 0). The worst seen on the emulator over 40 random cases of 1 to 3000 classes:
//   2.1 * 2**-24 * (|loss| + w * (|lse| + 1)) for a loss, 5.4 * 2**-24 * (1 + |lse|) *
//   |g * scale * w| for a gradient element. The mean and the sum add their sums' roundings,
//   (ceil(rows / 256) + 8) * 2**-24 * sum(|loss|) here, NumPy's pairwise sum its own. Where
//   every sum is exact (one class) the kernels give the twin's bits.
//
// LAUNCH: forward and backward grid (min(rows, 8192),), block (256,): a block per row, blocks
//   stride over the rows; reduce grid (1,), block (256,), after the forward (mean and sum;
//   'none' returns the forward's loss). rows, n >= 1.
// DTYPES: x, dx, out T (float, __half or __nv_bfloat16); label L (long long or int);
//   ignore_index long long; weight float [n] or null; row_max, row_lse, row_weight, loss,
//   grad, scale float32; bad bool [1]; all C-contiguous; rows, n, mean, grad_stride int32.
//
// Python caller: minitorch_amp/backend/cross_entropy.py (from loss.CrossEntropy along the
// last axis of CuPy logits, when backend.kernels.enabled()). NumPy twin (the specification):
// loss.CrossEntropy on NumPy arrays. HOST EMULATION: tests/cross_entropy_emulator.cpp runs
// this file on the CPU through the real launcher (tests/test_cross_entropy_kernel.py).

// kThreads, block_reduce (the tree of ORDER above), Add, Max (NaN skipped, as fmaxf does),
// wide (x as float: exact for every T) and store (the one rounding to T of a float32
// result) are softmax.cu's own: a row's maximum and sum here are softmax's, step by step.
#include "softmax.cu"

namespace {

// The label's class when it is one (0 otherwise: the twin's safe index), and whether it is.
template <typename L>
__device__ __forceinline__ long long safe_label(L label, long long ignore_index, int n,
                                                bool* valid, bool* bad)
{
    const long long y = static_cast<long long>(label);
    const bool ignored = y == ignore_index;
    *bad = !ignored && (y < 0 || y >= n);
    *valid = !ignored && !*bad;
    return *valid ? y : 0;
}

}  // namespace

template <typename T, typename L>
__global__ void cross_entropy_forward(const T* x, const L* label, const float* weight,
                                      long long ignore_index, float* row_max, float* row_lse,
                                      float* row_weight, float* loss, bool* bad, int rows, int n)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        const T* xr = x + static_cast<long long>(row) * n;
        float m = -__int_as_float(0x7f800000);  // -inf: the maximum of nothing yet
        for (int i = t; i < n; i += kThreads) m = fmaxf(m, wide(xr[i]));
        m = block_reduce(m, partial, Max());
        float s = 0.0f;
        for (int i = t; i < n; i += kThreads) s = __fadd_rn(s, expf(__fsub_rn(wide(xr[i]), m)));
        s = block_reduce(s, partial, Add());
        if (t == 0) {
            bool valid, out_of_range;
            const long long safe = safe_label(label[row], ignore_index, n, &valid, &out_of_range);
            if (out_of_range) *bad = true;  // every writer writes true: no race on the value
            const float lse = logf(s);
            const float picked = __fsub_rn(__fsub_rn(wide(xr[safe]), m), lse);
            const float on = valid ? 1.0f : 0.0f;
            const float w = weight == nullptr ? on : __fmul_rn(weight[safe], on);
            row_max[row] = m;
            row_lse[row] = lse;
            row_weight[row] = w;
            loss[row] = __fmul_rn(-picked, w);
        }
    }
}

template <typename T>
__global__ void cross_entropy_reduce(const float* loss, const float* row_weight, int rows,
                                     int mean, float* scale, T* out)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    float total = 0.0f;
    float den = 0.0f;
    for (int i = t; i < rows; i += kThreads) {
        total = __fadd_rn(total, loss[i]);
        den = __fadd_rn(den, row_weight[i]);
    }
    total = block_reduce(total, partial, Add());
    den = block_reduce(den, partial, Add());
    if (t == 0) {
        if (mean) {
            const float s = __fdiv_rn(1.0f, den == 0.0f ? 1.0f : den);  // the twin's den + (den == 0)
            *scale = s;
            total = __fmul_rn(total, s);
        }
        store(out, total);
    }
}

template <typename T, typename L>
__global__ void cross_entropy_backward(const T* x, const L* label, long long ignore_index,
                                       const float* row_max, const float* row_lse,
                                       const float* row_weight, const float* grad,
                                       int grad_stride, const float* scale, T* dx, int rows, int n)
{
    const int t = static_cast<int>(threadIdx.x);
    const float by = scale == nullptr ? 1.0f : *scale;
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        bool valid, out_of_range;
        const long long safe = safe_label(label[row], ignore_index, n, &valid, &out_of_range);
        const float g = __fmul_rn(__fmul_rn(grad[static_cast<long long>(row) * grad_stride], by),
                                  row_weight[row]);
        const float m = row_max[row];
        const float lse = row_lse[row];
        const long long start = static_cast<long long>(row) * n;
        for (int i = t; i < n; i += kThreads) {
            const float p = expf(__fsub_rn(__fsub_rn(wide(x[start + i]), m), lse));
            store(dx + start + i, __fmul_rn(i == safe ? __fsub_rn(p, 1.0f) : p, g));
        }
    }
}

#define MINITORCH_CROSS_ENTROPY(T, L)                                                          \
    template __global__ void cross_entropy_forward<T, L>(const T*, const L*, const float*,     \
                                                         long long, float*, float*, float*,    \
                                                         float*, bool*, int, int);             \
    template __global__ void cross_entropy_backward<T, L>(const T*, const L*, long long,       \
                                                          const float*, const float*,          \
                                                          const float*, const float*, int,     \
                                                          const float*, T*, int, int);
MINITORCH_CROSS_ENTROPY(float, long long)
MINITORCH_CROSS_ENTROPY(float, int)
MINITORCH_CROSS_ENTROPY(__half, long long)
MINITORCH_CROSS_ENTROPY(__half, int)
MINITORCH_CROSS_ENTROPY(__nv_bfloat16, long long)
MINITORCH_CROSS_ENTROPY(__nv_bfloat16, int)
#undef MINITORCH_CROSS_ENTROPY
template __global__ void cross_entropy_reduce<float>(const float*, const float*, int, int, float*,
                                                     float*);
template __global__ void cross_entropy_reduce<__half>(const float*, const float*, int, int,
                                                      float*, __half*);
template __global__ void cross_entropy_reduce<__nv_bfloat16>(const float*, const float*, int, int,
                                                             float*, __nv_bfloat16*);
