// layer_norm.cu: LayerNorm over the last axis of a float32 [rows, n] array, forward and
// backward, in three launches where CuPy's array expressions take about twenty-five.
//
// layer_norm_forward: for each row r of x (n values),
//     mean = sum(x) / n;  var = sum((x - mean)^2) * (1/n);  rstd = 1 / sqrt(var + eps)
//     y = (x - mean) * rstd  [* w]  [+ b]          (w, b: [n] float32, flags LN_WEIGHT/LN_BIAS)
//   and stores mean[r] and rstd[r] for the backward. Each step is one IEEE float32 operation
//   rounded to nearest (__fadd_rn etc.: no FMA contraction), in the op's order: the sum and
//   the square sum as the block tree below, var's 1/n rounded to float32 first, as the NumPy
//   op multiplies by the Python float 1/n.
// layer_norm_backward_input: with xhat = (x - mean) * rstd and gw = g [* w],
//     dx = ((gw - sum(gw) * (1/n)) - xhat * (sum(gw * xhat) * (1/n))) * rstd
//   (the gradient's mean and its projection on xhat removed), per row.
// layer_norm_backward_params: dw[j] = sum over rows of g * xhat, db[j] = sum of g, per column
//   (flags LN_WEIGHT / LN_BIAS say which to write).
//
// ORDER (deterministic: the shape alone decides it, never the grid or the GPU): a row's sum
//   is thread t's running sum of elements t, t + 256, t + 512, ... in that order, then a tree
//   over the 256 partial sums in shared memory (stride 128, 64, ..., 1). A column's sum in
//   layer_norm_backward_params is row group q's running sum of rows q, q + 8, q + 16, ...
//   (q = 0..7), then the 8 partials added in order q = 0..7. The NumPy op sums with BLAS, in
//   another order: the two agree within the float32 bounds the tests use, not bit for bit.
//
// LAUNCH: forward and backward_input: grid (min(rows, 8192),), block (256,), blocks stride
//   over the rows; backward_params: grid (min(ceil(n / 32), 65535),), block (256,) = 32
//   columns x 8 row groups, blocks stride over the column tiles. rows >= 1, n >= 1.
// DTYPES: x, g, w, b, y, dx, dw, db, mean, rstd float32, C-contiguous; rows, n, flags int32;
//   eps float32. w and b are read only when their flag is set (pass any valid pointer).
//
// Python caller: minitorch_amp/backend/layer_norm.py (from nn_ops.LayerNorm on CuPy float32
// rows, when backend.kernels.enabled()). NumPy twin (the specification): nn_ops.LayerNorm's
// forward and backward on NumPy arrays. HOST EMULATION: tests/layer_norm_emulator.cpp runs
// this file on the CPU through the real launcher (tests/test_layer_norm_kernel.py).

namespace {

constexpr int kThreads = 256;     // threads per block (the launcher's block size)
constexpr int kColumns = 32;      // backward_params: columns per block ...
constexpr int kRowGroups = 8;     // ... and row groups (32 x 8 = 256 threads)
constexpr int LN_WEIGHT = 1;      // flags bit: a weight w (forward, backward_input), dw
constexpr int LN_BIAS = 2;        // flags bit: a bias b (forward), db

// The sum of every thread's v, in the tree of the header's ORDER; all threads get it.
__device__ __forceinline__ float block_sum(float v, float* partial)
{
    const int t = static_cast<int>(threadIdx.x);
    partial[t] = v;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] = __fadd_rn(partial[t], partial[t + stride]);
        __syncthreads();
    }
    const float total = partial[0];
    __syncthreads();  // partial is free again for the next sum
    return total;
}

}  // namespace

extern "C" __global__ void layer_norm_forward(const float* x, const float* w, const float* b,
                                              float* y, float* mean_out, float* rstd_out,
                                              int rows, int n, float eps, int flags)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    const float inv_n = __fdiv_rn(1.0f, static_cast<float>(n));  // 1/n rounded once
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        const float* xr = x + static_cast<long long>(row) * n;
        float* yr = y + static_cast<long long>(row) * n;
        float s = 0.0f;
        for (int i = t; i < n; i += kThreads) s = __fadd_rn(s, xr[i]);
        const float mean = __fdiv_rn(block_sum(s, partial), static_cast<float>(n));
        float q = 0.0f;
        for (int i = t; i < n; i += kThreads) {
            const float d = __fsub_rn(xr[i], mean);
            q = __fadd_rn(q, __fmul_rn(d, d));
        }
        const float var = __fmul_rn(block_sum(q, partial), inv_n);
        const float rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
        for (int i = t; i < n; i += kThreads) {
            float v = __fmul_rn(__fsub_rn(xr[i], mean), rstd);
            if (flags & LN_WEIGHT) v = __fmul_rn(v, w[i]);
            if (flags & LN_BIAS) v = __fadd_rn(v, b[i]);
            yr[i] = v;
        }
        if (t == 0) {
            mean_out[row] = mean;
            rstd_out[row] = rstd;
        }
    }
}

extern "C" __global__ void layer_norm_backward_input(const float* x, const float* g,
                                                     const float* w, const float* mean,
                                                     const float* rstd, float* dx, int rows,
                                                     int n, int flags)
{
    __shared__ float partial[kThreads];
    const int t = static_cast<int>(threadIdx.x);
    const float inv_n = __fdiv_rn(1.0f, static_cast<float>(n));
    for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
        const long long start = static_cast<long long>(row) * n;
        const float m = mean[row];
        const float r = rstd[row];
        float s1 = 0.0f;
        float s2 = 0.0f;
        for (int i = t; i < n; i += kThreads) {
            const float xhat = __fmul_rn(__fsub_rn(x[start + i], m), r);
            const float gw = (flags & LN_WEIGHT) ? __fmul_rn(g[start + i], w[i]) : g[start + i];
            s1 = __fadd_rn(s1, gw);
            s2 = __fadd_rn(s2, __fmul_rn(gw, xhat));
        }
        const float mean_gw = __fmul_rn(block_sum(s1, partial), inv_n);
        const float proj = __fmul_rn(block_sum(s2, partial), inv_n);
        for (int i = t; i < n; i += kThreads) {
            const float xhat = __fmul_rn(__fsub_rn(x[start + i], m), r);
            const float gw = (flags & LN_WEIGHT) ? __fmul_rn(g[start + i], w[i]) : g[start + i];
            const float centred = __fsub_rn(gw, mean_gw);
            dx[start + i] = __fmul_rn(__fsub_rn(centred, __fmul_rn(xhat, proj)), r);
        }
    }
}

extern "C" __global__ void layer_norm_backward_params(const float* x, const float* g,
                                                      const float* mean, const float* rstd,
                                                      float* dw, float* db, int rows, int n,
                                                      int flags)
{
    __shared__ float sums_w[kRowGroups][kColumns];
    __shared__ float sums_b[kRowGroups][kColumns];
    const int lane = static_cast<int>(threadIdx.x) % kColumns;
    const int group = static_cast<int>(threadIdx.x) / kColumns;
    const int tiles = (n + kColumns - 1) / kColumns;
    for (int tile = static_cast<int>(blockIdx.x); tile < tiles;
         tile += static_cast<int>(gridDim.x)) {
        const int col = tile * kColumns + lane;
        float sw = 0.0f;
        float sb = 0.0f;
        if (col < n) {
            for (int row = group; row < rows; row += kRowGroups) {
                const long long at = static_cast<long long>(row) * n + col;
                const float xhat = __fmul_rn(__fsub_rn(x[at], mean[row]), rstd[row]);
                sw = __fadd_rn(sw, __fmul_rn(g[at], xhat));
                sb = __fadd_rn(sb, g[at]);
            }
        }
        sums_w[group][lane] = sw;
        sums_b[group][lane] = sb;
        __syncthreads();
        if (group == 0 && col < n) {
            float total_w = sums_w[0][lane];
            float total_b = sums_b[0][lane];
            for (int q = 1; q < kRowGroups; ++q) {
                total_w = __fadd_rn(total_w, sums_w[q][lane]);
                total_b = __fadd_rn(total_b, sums_b[q][lane]);
            }
            if (flags & LN_WEIGHT) dw[col] = total_w;
            if (flags & LN_BIAS) db[col] = total_b;
        }
        __syncthreads();  // the sums are free again for the next tile
    }
}
