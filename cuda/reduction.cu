// reduction.cu: a deterministic sum of squares, the squared L2 norm that gradient clipping
// needs: out = sum_i x[i] * x[i], accumulated in Acc (float or double) from x of dtype T
// (__half, __nv_bfloat16, float or double; all eight pairs are compiled).
//
// Deterministic: the same bits on every run and on every GPU, whatever grid the launcher
// picks, because where each addition happens depends on n alone, never on the grid:
//
//   1. Tiles. x is cut into tiles of kTile = 4096 elements (the last one short); tile p's
//      sum of squares goes to partials[p]. Inside a tile, thread t of a 256-thread block adds
//      the squares of elements t, t + 256, ..., t + 15 * 256 in that order (each load is
//      coalesced across the warp), then the block adds its 256 sums in a tree in shared
//      memory: lane[t] += lane[t + s] for s = 128, 64, ..., 1. Block b takes tiles b,
//      b + gridDim.x, ...: the grid decides which block sums a tile, never how.
//   2. Partials. One block sums the P = ceil(n / kTile) partials: thread t adds partials t,
//      t + 256, ... in that order, then the same tree; out[0] is the result (0 when n is 0).
//
// Two kernels carry these steps:
//   sum_squares<T, Acc>: step 1; and when its grid is one block, step 2 as well (after a
//     barrier, the block reads back the partials it wrote), so a small x takes one launch.
//     Launch: grid (1,) when P <= 16, else (min(P, 1024),); block (kThreads = 256,).
//     Args: x T [n] (C-contiguous), n int64, partials Acc [P] (written), out Acc [1]
//     (written when the grid is one block).
//   sum_partials<Acc>: step 2 alone, after a sum_squares of more than one block.
//     Launch: grid (1,), block (kThreads = 256,). Args: partials Acc [P], P int64,
//     out Acc [1] (written).
// The launcher allocates one Acc array [1 + P] per call, out first, then the partials, and
// returns out as a 0-d view: the one allocation CuPy's own reduction makes for its result
// (during a CUDA-graph capture it comes from the graph's pool, as every output does). No
// atomics, no cuBLAS, no temporary, no host read: a clipping step can be captured.
//
// Arithmetic. x is widened to Acc exactly (a double is rounded to the nearest float when Acc
// is float), squared and added with __fmul_rn / __fadd_rn (__dmul_rn / __dadd_rn), which are
// never contracted into an fma: every square and every sum is rounded once, to nearest even,
// so a NumPy model of this order gives the same bits (tests/test_primitive_kernels.py).
// CuPy compiles with -ftz=true: a float32 square below 2**-126 is 0 (so are float32 and
// bfloat16 subnormal inputs); a sum of such squares would be below float32's normal range.
// The error is at most about (33 + ceil(P / 256)) * u * out, u = 2**-24 (float) or 2**-53
// (double): 16 + 8 additions in a tile, ceil(P / 256) + 8 over the partials, 1 for the square.
//
// Python caller: minitorch_amp/backend/primitives.py, sum_squares (on CuPy arrays, when
// backend.kernels.enabled(); MINITORCH_AMP_RAW_KERNELS=0 computes CuPy's own
// (x.astype(Acc) ** 2).sum()).
// NumPy twin (the specification): sum_squares on NumPy arrays, np.dot(x, x) in Acc. BLAS adds
// in its own order, so the kernel agrees with the twin within the error bound above.
//
// The file's second part, squared_error<Acc> and mean_partials<Acc> (with their own header
// there): mse_loss's difference and mean of squares in the same order. Its third part,
// bias_grad<G, B, P>: a Linear layer's bias gradient, its grad cast to the product's dtype
// and an optional ReLU mask, in one deterministic pass.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kThreads = 256;  // threads per block (the launcher's block size)
constexpr int kPerThread = 16;
constexpr long long kTile = kThreads * kPerThread;  // elements per partial sum

// x as an Acc: exact for every T narrower than Acc; a double rounds to the nearest float.
template <typename Acc> __device__ __forceinline__ Acc widen(__half x)
{
    return static_cast<Acc>(__half2float(x));
}
template <typename Acc> __device__ __forceinline__ Acc widen(__nv_bfloat16 x)
{
    return static_cast<Acc>(__bfloat162float(x));
}
template <typename Acc> __device__ __forceinline__ Acc widen(float x)
{
    return static_cast<Acc>(x);
}
template <typename Acc> __device__ __forceinline__ Acc widen(double x)
{
    return static_cast<Acc>(x);
}

// One rounding each, never fused into an fma.
__device__ __forceinline__ float square(float v) { return __fmul_rn(v, v); }
__device__ __forceinline__ double square(double v) { return __dmul_rn(v, v); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float multiply(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double multiply(double a, double b) { return __dmul_rn(a, b); }

// The block's kThreads values summed in a fixed tree; the sum is valid in thread 0 only
// (the others may already be writing lane for the next sum). Every thread must call it.
template <typename Acc> __device__ __forceinline__ Acc block_sum(Acc value, Acc* lane)
{
    lane[threadIdx.x] = value;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s /= 2) {
        if (static_cast<int>(threadIdx.x) < s) {
            lane[threadIdx.x] = add(lane[threadIdx.x], lane[threadIdx.x + s]);
        }
        __syncthreads();
    }
    return lane[0];
}

// Step 2: the partials in order, per thread, then the tree; thread 0 writes out[0].
template <typename Acc>
__device__ __forceinline__ void sum_in_order(const Acc* partials, long long n_partials,
                                             Acc* out, Acc* lane)
{
    Acc sum = 0;
    for (long long p = threadIdx.x; p < n_partials; p += kThreads) sum = add(sum, partials[p]);
    sum = block_sum(sum, lane);
    if (threadIdx.x == 0) *out = sum;
}

// Step 1 for one tile: thread t's squares in order, then the tree (valid in thread 0).
template <typename T, typename Acc>
__device__ __forceinline__ Acc tile_squares(const T* x, long long n, long long tile, Acc* lane)
{
    const long long first = tile * kTile + threadIdx.x;
    Acc sum = 0;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const long long i = first + static_cast<long long>(k) * kThreads;
        if (i < n) sum = add(sum, square(widen<Acc>(x[i])));
    }
    return block_sum(sum, lane);
}

}  // namespace

template <typename T, typename Acc>
__global__ void __launch_bounds__(kThreads)
    sum_squares(const T* __restrict__ x, long long n, Acc* partials, Acc* out)
{
    __shared__ Acc lane[kThreads];
    const long long n_tiles = (n + kTile - 1) / kTile;
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const Acc sum = tile_squares<T, Acc>(x, n, tile, lane);
        if (threadIdx.x == 0) partials[tile] = sum;
    }
    if (gridDim.x == 1) {  // the only block: finish here, exactly as sum_partials would
        __syncthreads();   // thread 0's partials are visible to the block after the barrier
        sum_in_order(partials, n_tiles, out, lane);
    }
}

template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    sum_partials(const Acc* __restrict__ partials, long long n_partials, Acc* __restrict__ out)
{
    __shared__ Acc lane[kThreads];
    sum_in_order(partials, n_partials, out, lane);
}

// Every (T, Acc) pair, instantiated explicitly so that nvcc builds (and CI checks) them too;
// the loader names the same instantiations in its name expressions.
#define MINITORCH_SUM_SQUARES(T, Acc)                                                   \
    template __global__ void sum_squares<T, Acc>(const T* __restrict__, long long, Acc*, \
                                                 Acc*);
MINITORCH_SUM_SQUARES(__half, float)
MINITORCH_SUM_SQUARES(__nv_bfloat16, float)
MINITORCH_SUM_SQUARES(float, float)
MINITORCH_SUM_SQUARES(double, float)
MINITORCH_SUM_SQUARES(__half, double)
MINITORCH_SUM_SQUARES(__nv_bfloat16, double)
MINITORCH_SUM_SQUARES(float, double)
MINITORCH_SUM_SQUARES(double, double)
#undef MINITORCH_SUM_SQUARES
template __global__ void sum_partials<float>(const float* __restrict__, long long,
                                             float* __restrict__);
template __global__ void sum_partials<double>(const double* __restrict__, long long,
                                              double* __restrict__);

// ---- squared_error: mse_loss's forward, the difference and the mean (or sum) of its squares
//
// squared_error<Acc>: for input and label [n] of dtype Acc (float or double: the op's
// accumulation dtype; MseLoss casts 16-bit inputs to float32 first):
//   diff[i] = input[i] - label[i]    (written: the array MseLoss saves for its backward)
//   out[0]  = sum_i diff[i] * diff[i], divided by n when mean is 1 (nan for n = 0, as 0 / 0)
// in the order of sum_squares above: tiles of kTile elements, thread t adding the squares of
// elements t, t + 256, ..., t + 15 * 256 of its tile, the block's tree, one partial per tile
// (block b takes tiles b, b + gridDim.x, ...); then the partials in order and the same tree.
// A one-block grid finishes in the same launch; a larger one is followed by mean_partials<Acc>
// (mean) or sum_partials<Acc> (sum). Deterministic, no atomics, no temporary, no host read.
//   Launch: as sum_squares: grid (1,) when P = ceil(n / kTile) <= 16, else (min(P, 1024),);
//   block (kThreads = 256,). Args: input, label Acc [n] (C-contiguous), n int64, mean int32,
//   diff Acc [n] (written), partials Acc [P] (written), out Acc [1] (written when the grid
//   is one block).
// mean_partials<Acc>: step 2 and the division. Launch: grid (1,), block (256,). Args: partials
//   Acc [P], P int64, n int64, out Acc [1] (written).
// squared_error_backward<Acc>: mse_loss's input gradient for a mean (sum) loss,
//   out[i] = diff[i] * (grad[0] * scale), scale = 2 / n (2): the 0-d incoming gradient read
//   on the device (no host read) and multiplied by the scale once, then each element
//   multiplied once, both rounded to nearest (__fmul_rn / __dmul_rn): the two launches of
//   the expression diff * (grad * scale) in one, with their bits (a float32 product below
//   2**-126 is 0 under -ftz, as it was in CuPy's own multiplications). Launch: grid
//   (min(ceil(n / 256), 4096),), block (256,); blocks stride over the elements. Args: diff
//   Acc [n] (C-contiguous), grad Acc [1], scale Acc, n int64, out Acc [n] (written).
//
// Arithmetic. The difference is one rounded add of -label (a - b is a + (-b) in IEEE), the
// square and the sums as sum_squares's (__fmul_rn / __fadd_rn, never contracted into an fma).
// Under CuPy's -ftz=true a float32 subnormal input reads as 0 and a subnormal difference is
// written as 0, as CuPy's own a - b (also compiled with -ftz) did before; a float32 square
// below 2**-126 counts as 0, so the float sum is 0, at least 2**-126, inf or NaN. The mean is
// the double quotient sum / n (IEEE division, never flushed; exact operands for n < 2**53)
// rounded once to float, below 2**-126 built from its bits (a float conversion would flush
// it): NumPy's mean of a float32 array, float32(float64(sum) / n), has the same two steps,
// and double rounding a quotient of floats through 53 bits is exact rounding. In double the
// quotient is one division. Against the exact mean (sum) of diff's squares the error is at
// most (34 + ceil(P / 256)) * u times it: sum_squares's bound and the division (plus 2**-126
// in float, for the flushed squares).
//
// Python caller: minitorch_amp/backend/squared_error.py, squared_error (on CuPy arrays, when
// backend.kernels.enabled(); from MseLoss.forward in autograd/ops/loss.py).
// NumPy twin (the specification): squared_error on NumPy arrays, the op's former maths:
// diff = input - label, then (diff * diff).mean() (NumPy's pairwise sum) or .sum().

namespace {

// sum / n, rounded once to nearest even (see "Arithmetic" above).
__device__ __forceinline__ double divide(double sum, long long n)
{
    return sum / static_cast<double>(n);
}
__device__ __forceinline__ float divide(float sum, long long n)
{
    const double quotient = static_cast<double>(sum) / static_cast<double>(n);
    if (!(fabs(quotient) < 0x1p-126)) return static_cast<float>(quotient);  // normal, inf, NaN
    union {
        unsigned int bits;
        float value;
    } subnormal;  // k * 2**-149, k = quotient * 2**149 rounded to nearest even (sum >= +0)
    subnormal.bits = static_cast<unsigned int>(rint(quotient * 0x1p149));
    return subnormal.value;
}

}  // namespace

template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    squared_error(const Acc* __restrict__ input, const Acc* __restrict__ label, long long n,
                  int mean, Acc* __restrict__ diff, Acc* partials, Acc* out)
{
    __shared__ Acc lane[kThreads];
    const long long n_tiles = (n + kTile - 1) / kTile;
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const long long first = tile * kTile + threadIdx.x;
        Acc sum = 0;
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            const long long i = first + static_cast<long long>(k) * kThreads;
            if (i < n) {
                const Acc d = add(input[i], -label[i]);
                diff[i] = d;
                sum = add(sum, square(d));
            }
        }
        sum = block_sum(sum, lane);
        if (threadIdx.x == 0) partials[tile] = sum;
    }
    if (gridDim.x == 1) {  // the only block: finish here, as mean_partials / sum_partials would
        __syncthreads();
        sum_in_order(partials, n_tiles, out, lane);
        if (mean != 0 && threadIdx.x == 0) *out = divide(*out, n);
    }
}

template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    mean_partials(const Acc* __restrict__ partials, long long n_partials, long long n,
                  Acc* __restrict__ out)
{
    __shared__ Acc lane[kThreads];
    sum_in_order(partials, n_partials, out, lane);
    if (threadIdx.x == 0) *out = divide(*out, n);
}

template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    squared_error_backward(const Acc* __restrict__ diff, const Acc* __restrict__ grad,
                           Acc scale, long long n, Acc* __restrict__ out)
{
    const Acc factor = multiply(*grad, scale);
    const long long stride = static_cast<long long>(gridDim.x) * kThreads;
    for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n;
         i += stride) {
        out[i] = multiply(diff[i], factor);
    }
}

template __global__ void squared_error<float>(const float* __restrict__,
                                              const float* __restrict__, long long, int,
                                              float* __restrict__, float*, float*);
template __global__ void squared_error<double>(const double* __restrict__,
                                               const double* __restrict__, long long, int,
                                               double* __restrict__, double*, double*);
template __global__ void mean_partials<float>(const float* __restrict__, long long, long long,
                                              float* __restrict__);
template __global__ void mean_partials<double>(const double* __restrict__, long long, long long,
                                               double* __restrict__);
template __global__ void squared_error_backward<float>(const float* __restrict__,
                                                       const float* __restrict__, float,
                                                       long long, float* __restrict__);
template __global__ void squared_error_backward<double>(const double* __restrict__,
                                                        const double* __restrict__, double,
                                                        long long, double* __restrict__);

// ---- bias_grad: a Linear layer's bias gradient, and its grad cast to the product, in one pass
//
// bias_grad<G, B, P>: for g [rows, n] of dtype G (float, __half or __nv_bfloat16), optional
// y [rows, n] of dtype G (y = relu(x); nullptr: no mask):
//   m[r, c]  = g[r, c] where y[r, c] > 0, else g[r, c] * 0 (no mask: m = g). Exactly
//              relu_backward of elementwise.cu: a multiply, so an inf or NaN gradient where
//              the unit is off is NaN; y > 0 judged on y's bits (subnormals are positive).
//   gb[c]    = sum over r of m[r, c], each m widened exactly to float, added in float, and
//              rounded once to B (G's type, or float for a 16-bit G; round to nearest even,
//              past the largest finite to inf, as a cast does).
//   gp[r, c] = m[r, c] rounded once to P (G, or __half or __nv_bfloat16 for a float G), when
//              gp is not nullptr: the gradient of the 16-bit product behind an add that
//              promoted it (AMP O1/OD: float16 product + float32 bias).
// It replaces, on the GPU, CuPy's sum(axis=0, dtype=float32), the cast of that sum to the bias's
// dtype, and grad.astype(product): three launches, one here.
//
// Deterministic: where each addition happens depends on rows and n alone, never on the grid.
// A block owns kBiasColumns = 32 consecutive columns (one warp reads 32 consecutive elements of
// a row: coalesced) and has kBiasGroups = 8 row groups of 32 threads: thread (group j,
// column c) adds m[j, c], m[j + 8, c], m[j + 16, c], ... in that order, starting from +0;
// then the 8 group sums meet in a fixed tree in shared memory, lane[j] += lane[j + s] for
// s = 4, 2, 1: gb = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). Block b takes column
// tiles b, b + gridDim.x, ...: the grid decides which block sums a tile, never how.
//   Launch: grid (min(ceil(n / 32), 65535),) (n > 0), block (kThreads = 256,).
//   Args: g G [rows, n], y G [rows, n] or nullptr, rows int64, n int64, gb B [n] (written),
//   gp P [rows, n] or nullptr (written). All C-contiguous. No atomics, no cuBLAS, no
//   temporary, no host read: a backward step can be captured in a CUDA graph.
//
// Arithmetic. Every sum is one __fadd_rn (never contracted into an fma), rounded to nearest
// even, so a NumPy model of this order gives the same bits (tests/test_bias_grad.py). Under
// CuPy's -ftz=true a float32 subnormal m (float and bfloat16 inputs) adds as a zero of its
// sign, and a subnormal sum is flushed to a zero of its sign; the casts to B and P are exact
// roundings (cvt.rn, no flush). The error before the rounding to B is at most
// (ceil(rows / 8) + 3) * u * sum |m|, u = 2**-24 (the additions on the longest path), plus
// 2**-126 per flushed value.
//
// Python caller: minitorch_amp/backend/bias_grad.py, bias_grad (on CuPy arrays, when
// backend.kernels.enabled(); from Linear.backward in autograd/ops/linalg.py).
// NumPy twin (the specification): bias_grad on NumPy arrays: column_sums of
// relu_backward(y, g) (BLAS's order: within the error bound above) and its astype(P).

namespace {

constexpr int kBiasColumns = 32;                      // columns per block: a warp's row segment
constexpr int kBiasGroups = kThreads / kBiasColumns;  // row groups per block

// y > 0 on y's bits: the sign bit clear, not +0, not NaN (as elementwise.cu's positive()).
__device__ __forceinline__ bool unit_on(float y)
{
    const unsigned int bits = __float_as_uint(y);
    return bits != 0u && bits <= 0x7f800000u;
}
__device__ __forceinline__ bool unit_on(__half y)
{
    const unsigned short bits = __half_as_ushort(y);
    return bits != 0u && bits <= 0x7c00u;
}
__device__ __forceinline__ bool unit_on(__nv_bfloat16 y)
{
    const unsigned short bits = __bfloat16_as_ushort(y);
    return bits != 0u && bits <= 0x7f80u;
}

// g * 0 in G's arithmetic (16-bit floats through float): a zero of g's sign, NaN for inf/NaN.
__device__ __forceinline__ float unit_off(float g) { return __fmul_rn(g, 0.0f); }
__device__ __forceinline__ __half unit_off(__half g)
{
    return __float2half_rn(__fmul_rn(__half2float(g), 0.0f));
}
__device__ __forceinline__ __nv_bfloat16 unit_off(__nv_bfloat16 g)
{
    return __float2bfloat16_rn(__fmul_rn(__bfloat162float(g), 0.0f));
}

// The one rounding to an output type: to_type(value, (T*)nullptr) picks the overload.
__device__ __forceinline__ float to_type(float v, const float*) { return v; }
__device__ __forceinline__ __half to_type(float v, const __half*) { return __float2half_rn(v); }
__device__ __forceinline__ __nv_bfloat16 to_type(float v, const __nv_bfloat16*)
{
    return __float2bfloat16_rn(v);
}
__device__ __forceinline__ __half to_type(__half v, const __half*) { return v; }
__device__ __forceinline__ __nv_bfloat16 to_type(__nv_bfloat16 v, const __nv_bfloat16*)
{
    return v;
}

}  // namespace

constexpr int kBiasUnroll = 8;  // rows a thread loads before it adds the first of them

// One element m = g[i]: masked when `masked` and y[i] (given as y_i) has its unit off, then
// written to gp[i] when gp is given; returns m.
template <typename G, typename P>
__device__ __forceinline__ G bias_grad_element(G m, bool masked, G y_i, long long i,
                                               P* __restrict__ gp)
{
    if (masked && !unit_on(y_i)) m = unit_off(m);
    if (gp != nullptr) gp[i] = to_type(m, static_cast<const P*>(nullptr));
    return m;
}

template <typename G, typename B, typename P>
__global__ void __launch_bounds__(kThreads)
    bias_grad(const G* __restrict__ g, const G* __restrict__ y, long long rows, long long n,
              B* __restrict__ gb, P* __restrict__ gp)
{
    __shared__ float lane[kThreads];  // lane[group * 32 + column]
    const int column = static_cast<int>(threadIdx.x) % kBiasColumns;
    const int group = static_cast<int>(threadIdx.x) / kBiasColumns;
    const long long n_tiles = (n + kBiasColumns - 1) / kBiasColumns;
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const long long c = tile * kBiasColumns + column;
        float sum = 0.0f;
        if (c < n) {
            // kBiasUnroll rows' g loaded before the first is added (one load in flight per
            // warp left the H200 at ~20 us for [512, 4096]); the additions keep their order.
            const bool masked = y != nullptr;
            long long r = group;
            for (; r + (kBiasUnroll - 1) * kBiasGroups < rows; r += kBiasUnroll * kBiasGroups) {
                G m[kBiasUnroll], y_r[kBiasUnroll];
#pragma unroll
                for (int u = 0; u < kBiasUnroll; ++u) {
                    const long long i = (r + u * kBiasGroups) * n + c;
                    m[u] = g[i];
                    y_r[u] = masked ? y[i] : m[u];
                }
#pragma unroll
                for (int u = 0; u < kBiasUnroll; ++u) {
                    const long long i = (r + u * kBiasGroups) * n + c;
                    sum = add(sum, widen<float>(bias_grad_element(m[u], masked, y_r[u], i, gp)));
                }
            }
            for (; r < rows; r += kBiasGroups) {
                const long long i = r * n + c;
                const G y_i = masked ? y[i] : g[i];
                sum = add(sum, widen<float>(bias_grad_element(g[i], masked, y_i, i, gp)));
            }
        }
        lane[threadIdx.x] = sum;
        __syncthreads();
        for (int s = kBiasGroups / 2; s > 0; s /= 2) {
            if (group < s) {
                lane[threadIdx.x] = add(lane[threadIdx.x], lane[threadIdx.x + s * kBiasColumns]);
            }
            __syncthreads();
        }
        if (group == 0 && c < n) gb[c] = to_type(lane[threadIdx.x], static_cast<const B*>(nullptr));
        __syncthreads();  // lane is written again for the block's next tile
    }
}

// The (G, B, P) triples the launcher names (P = G when gp is not wanted): the same
// instantiations in nvcc builds (and CI) as in the loader's name expressions.
#define MINITORCH_BIAS_GRAD(G, B, P)                                                        \
    template __global__ void bias_grad<G, B, P>(const G* __restrict__, const G* __restrict__, \
                                                long long, long long, B* __restrict__,       \
                                                P* __restrict__);
MINITORCH_BIAS_GRAD(float, float, float)
MINITORCH_BIAS_GRAD(float, float, __half)
MINITORCH_BIAS_GRAD(float, float, __nv_bfloat16)
MINITORCH_BIAS_GRAD(__half, __half, __half)
MINITORCH_BIAS_GRAD(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16)
MINITORCH_BIAS_GRAD(__half, float, __half)
MINITORCH_BIAS_GRAD(__nv_bfloat16, float, __nv_bfloat16)
#undef MINITORCH_BIAS_GRAD

// ---- global_norm: ClipGradByGlobalNorm's norm and scaling over all its gradients at once
//
// ClipGradByGlobalNorm over G gradients took some 4 G launches on the GPU: a sum_squares per
// gradient, a chain of 0-d additions, sqrt, maximum and a division, and a multiply per
// gradient (a widening too for 16-bit ones). These three kernels do the same arithmetic in
// the same order in 2 D + 1 launches, D the number of gradient dtypes (one, or two with
// LayerNorm's float32 gradients beside float16 ones at O2):
//
//   sum_squares_tensors<T>: the tiles of every gradient of dtype T, each summed exactly as
//     sum_squares<T, float> sums it (tile_squares), written to partials[start_i + p] for tile
//     p of gradient i. Block b takes the dtype's tiles b, b + gridDim.x, ... counted over all
//     its gradients; a tile finds its gradient by binary search over their first tiles.
//   clip_scale: one block. For each gradient in order, its partials in order and the tree
//     (sum_in_order: what sum_squares or sum_partials does with them), added to a float32
//     total that starts at 0 (Python's sum of the 0-d results); then norm = sqrt(total),
//     m = maximum(norm, clip) (NaN kept, as cupy.maximum keeps it), scale = clip / m; each
//     operation rounded once (__fsqrt_rn, __fdiv_rn), as CuPy's float32 sqrt and division
//     are. out[0] = scale, out[1] = norm.
//   scale_tensors<T>: out_i[j] = T(float(g_i[j]) * scale), one float32 product rounded once
//     to T (what cupy.multiply(g.astype(float32), scale, out=out_i) writes). Block b takes
//     the dtype's tiles b, b + gridDim.x, ... as above.
// The result has the bits of the per-gradient path (tests/test_global_norm.py checks it on
// the emulator, with NaN, inf, empty and many-tile gradients).
//   Launch: sum_squares_tensors and scale_tensors: grid (min(tiles, 1024),), block
//   (kThreads,); clip_scale: grid (1,), block (kThreads,).
//   Args: table int64 [5 * count + 1] for the dtype's count gradients: their data pointers,
//   their outputs' pointers, their sizes, their first partial's index in the whole
//   partials array, and the cumulative count of the dtype's tiles before each (count + 1
//   words, the last the dtype's total). clip_scale: partials float [P], starts int64
//   [count + 1] over all gradients in order, count int32, clip float, out float [2].
// Python caller: minitorch_amp/backend/global_norm.py (from nn/clip.py's
// ClipGradByGlobalNorm). NumPy twin: the per-gradient path, nn/clip.py.

namespace {

// The gradient that holds tile `tile` of a launch: the last i with first[i] <= tile
// (gradients without a tile have first[i] == first[i + 1] and are passed over).
__device__ __forceinline__ int tensor_of(const long long* first, int count, long long tile)
{
    int lo = 0, hi = count;  // first[lo] <= tile < first[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (first[mid] <= tile) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

}  // namespace

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sum_squares_tensors(const long long* __restrict__ table, int count, float* partials)
{
    __shared__ float lane[kThreads];
    const long long* n = table + 2 * count;
    const long long* start = table + 3 * count;
    const long long* first = table + 4 * count;
    for (long long tile = blockIdx.x; tile < first[count]; tile += gridDim.x) {
        const int i = tensor_of(first, count, tile);
        const T* x = reinterpret_cast<const T*>(table[i]);
        const float sum = tile_squares<T, float>(x, n[i], tile - first[i], lane);
        if (threadIdx.x == 0) partials[start[i] + tile - first[i]] = sum;
    }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    clip_scale(const float* __restrict__ partials, const long long* __restrict__ starts,
               int count, float clip, float* out)
{
    __shared__ float lane[kThreads];
    float total = 0.0f;  // thread 0's
    for (int i = 0; i < count; ++i) {
        float sum = 0.0f;
        sum_in_order(partials + starts[i], starts[i + 1] - starts[i], &sum, lane);
        if (threadIdx.x == 0) total = add(total, sum);
    }
    if (threadIdx.x == 0) {
        const float norm = __fsqrt_rn(total);
        const float most = norm != norm ? norm : fmaxf(norm, clip);
        out[0] = __fdiv_rn(clip, most);
        out[1] = norm;
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_tensors(const long long* __restrict__ table, int count, const float* __restrict__ scale)
{
    const long long* n = table + 2 * count;
    const long long* first = table + 4 * count;
    const float s = *scale;
    for (long long tile = blockIdx.x; tile < first[count]; tile += gridDim.x) {
        const int i = tensor_of(first, count, tile);
        const T* g = reinterpret_cast<const T*>(table[i]);
        T* out = reinterpret_cast<T*>(table[count + i]);
        const long long end = (tile - first[i] + 1) * kTile < n[i] ? (tile - first[i] + 1) * kTile
                                                                    : n[i];
        for (long long j = (tile - first[i]) * kTile + threadIdx.x; j < end; j += kThreads) {
            out[j] = to_type(__fmul_rn(widen<float>(g[j]), s), static_cast<const T*>(nullptr));
        }
    }
}

#define MINITORCH_GLOBAL_NORM(T)                                                           \
    template __global__ void sum_squares_tensors<T>(const long long* __restrict__, int,    \
                                                    float*);                               \
    template __global__ void scale_tensors<T>(const long long* __restrict__, int,          \
                                              const float* __restrict__);
MINITORCH_GLOBAL_NORM(__half)
MINITORCH_GLOBAL_NORM(__nv_bfloat16)
MINITORCH_GLOBAL_NORM(float)
#undef MINITORCH_GLOBAL_NORM

