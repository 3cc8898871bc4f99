// fp8_cast.cu: the scaled cast to FP8 (E4M3 or E5M2) fused with the absolute maximum, and
// the same cast writing the transposed copy too.
//
// WHAT IT COMPUTES (the NumPy twin is backend/fp8_kernels.py, twin_cast)
//
//   cast_fp8_amax<In>:            out[i] = fp8(float(x[i]) * scale[0])
//                                 *amax  = max(*amax, max_i |x[i]|)
//   cast_transpose_fp8_amax<In>:  the same for a row-major [rows, cols] x, writing also
//                                 out_t[c * rows + r] = out[r * cols + c]
//
//   fp8(v) rounds the float32 product v to nearest, ties to even, in the format `format`:
//     0 = E4M3 ("fn": bias 7, 3 mantissa bits, largest 448 = 0x7E, no inf, NaN 0x7F / 0xFF)
//     1 = E5M2 (bias 15, 2 mantissa bits, largest 57344 = 0x7B, inf 0x7C, NaN 0x7E / 0xFE)
//   Subnormals are kept (down to 2^-9 and 2^-16), the sign is kept (also of 0 and NaN), NaN
//   becomes the format's NaN. A value that rounds above the largest finite one becomes, with
//   saturate = 1, +-largest (so does +-inf: CUDA's __NV_SATFINITE, Transformer Engine's
//   casts), and with saturate = 0 what a plain conversion gives: NaN (E4M3), +-inf (E5M2),
//   bit for bit ml_dtypes' astype of the float32 product.
//
//   The amax is of the UNSCALED input, the number the recipe turns into the next scale.
//   It is reduced as the float's magnitude bits: for non-negative floats the integer order is
//   the numeric order, and every NaN's bits lie above +inf's, so a NaN anywhere makes the amax
//   a NaN (the recipe must see it). Each block reduces in shared memory and thread 0 folds the
//   block's maximum in with one atomicMax; the caller zeroes *amax first, or passes an amax
//   to fold several tensors into.
//
// NOTE: the rounding is written in integer arithmetic on the float's bits, not with
//   cuda_fp8.h: the same lines then compile with NVRTC on any architecture, with nvcc, and
//   with g++ in tests/fp8_cast_emulator.cpp, which checks them against ml_dtypes for every
//   float16 and bfloat16 value and 10^6 random float32 bit patterns, in both modes.
//
// DELAYED SCALING IN THE SAME LAUNCH: with a history (not null), the cast also runs
//   Transformer Engine's delayed-scaling update (fp8_scale.cu's delayed_scale_update, the same
//   code) once every block has folded its amax in: each block, after its atomicMax, fences
//   and counts itself done on *blocks_done; the block that counts last (it sees every other
//   block's amax) runs the update with all its threads and sets *blocks_done back to 0 for
//   the next launch. The cast reads scale[0] in every block before it counts, so the update
//   overwrites nothing a block still reads. The update then copies the inverse scale the cast
//   used into *used_scale_inv, moves the amax into the history, zeroes *amax and writes the
//   next scale and inverse: the two launches of a delayed cast become one.
//
// LAUNCH (backend/fp8_kernels.py): block (256,), 1-D grid-stride, grid min(ceil(n / 1024),
//   4096). cast_fp8_amax converts 4 consecutive elements per step (one 16- or 8-byte load,
//   one 4-byte store; the launcher hands it 16-byte-aligned x and out), then a scalar tail.
//   cast_transpose_fp8_amax: grid min(tiles, 4096), one 64 x 64 tile per step, staged in
//   shared memory so that both outputs are written along their rows. Each thread loads 4
//   rows of 4 elements (vector loads, all issued before the first conversion), writes `out`
//   4 bytes at a time and, from the tile, 4 rows of one column of x into `out_t` as a word:
//   words where the dimension is a multiple of 4 (and x 4-element aligned), bytes elsewhere.
//
// Dtypes: In = float, __half or __nv_bfloat16 (a CuPy bfloat16 array is ml_dtypes'); scale
//   float [1], amax unsigned [1] (the float32 amax's bits), out / out_t uint8. The update's
//   arguments (all null, or all given): amax_history float [n_history], scale_inv float [1],
//   used_scale_inv float [1], blocks_done unsigned [1] (0 before the launch, and after it),
//   n_history int >= 1, numerator float, algo int (fp8_scale.cu's).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fp8_scale.cu"

namespace {

constexpr int kThreads = 256;
constexpr int kTransposeTile = 64;  // cast_transpose_fp8_amax's tile: 64 x 64 elements

// Round the float whose bits are `u` to FP8 (format 0 = E4M3, 1 = E5M2), nearest-even.
__device__ __forceinline__ unsigned char float_to_fp8(unsigned u, int format, int saturate)
{
    const unsigned sign = (u >> 24) & 0x80u;
    const unsigned a = u & 0x7FFFFFFFu;  // |v|
    const bool e5m2 = format == 1;
    const unsigned mantissa = e5m2 ? 2 : 3;
    const unsigned bias = e5m2 ? 15 : 7;
    const unsigned largest = e5m2 ? 0x7Bu : 0x7Eu;  // 57344 or 448
    const unsigned nan = e5m2 ? 0x7Eu : 0x7Fu;
    const unsigned overflow = saturate ? largest : (e5m2 ? 0x7Cu : nan);  // inf or NaN
    if (a > 0x7F800000u) return static_cast<unsigned char>(sign | nan);
    if (a == 0x7F800000u) return static_cast<unsigned char>(sign | overflow);
    const unsigned exponent = a >> 23;  // biased by 127
    unsigned bits;
    if (exponent >= 127 + 1 - bias) {
        // A normal FP8 number: drop 23 - mantissa bits, to nearest even (the carry may step
        // into the exponent, which is right), then rebias the exponent from 127 to `bias`.
        const unsigned drop = 23 - mantissa;
        const unsigned rounded = (a + (1u << (drop - 1)) - 1 + ((a >> drop) & 1u)) >> drop;
        bits = rounded - ((127 - bias) << mantissa);
        if (bits > largest) bits = overflow;
    } else {
        // Below the smallest normal: count in units of the smallest subnormal
        // 2^(1 - bias - mantissa). v = m * 2^(exponent - 150) with the implicit bit in m, so
        // the count is m >> shift, rounded to nearest even. Rounding up to 2^mantissa units
        // gives the bits of the smallest normal, also right. Float32 subnormals (exponent 0)
        // are far below half a unit: they become a signed zero.
        const unsigned shift = 151 - bias - mantissa - exponent;
        if (exponent == 0 || shift > 25) return static_cast<unsigned char>(sign);
        const unsigned m = (a & 0x7FFFFFu) | 0x800000u;
        bits = (m + (1u << (shift - 1)) - 1 + ((m >> shift) & 1u)) >> shift;
    }
    return static_cast<unsigned char>(sign | bits);
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// The sign bit of the input, moved to bit 7, read from its own bits.
__device__ __forceinline__ unsigned sign_of(float x) { return (__float_as_uint(x) >> 24) & 0x80u; }
__device__ __forceinline__ unsigned sign_of(__half x) { return (__half_as_ushort(x) >> 8) & 0x80u; }
__device__ __forceinline__ unsigned sign_of(__nv_bfloat16 x)
{
    return (__bfloat16_as_ushort(x) >> 8) & 0x80u;
}

// One element: its FP8 bits, and its magnitude bits folded into the thread's running amax.
// NOTE: a NaN takes its sign from the input's bits, not from the product: the GPU's
// arithmetic (and its float16 -> float32 conversion) returns a canonical NaN without the sign
// that ml_dtypes keeps.
template <typename In>
__device__ __forceinline__ unsigned char convert(In x, float scale, int format, int saturate,
                                                 unsigned& amax)
{
    const float v = to_float(x);
    const unsigned magnitude = __float_as_uint(v) & 0x7FFFFFFFu;
    amax = magnitude > amax ? magnitude : amax;
    if (v != v) return static_cast<unsigned char>(sign_of(x) | (format == 1 ? 0x7Eu : 0x7Fu));
    return float_to_fp8(__float_as_uint(v * scale), format, saturate);
}

// The block's maximum of every thread's `mine`, folded into *amax by thread 0.
__device__ __forceinline__ void block_amax(unsigned mine, unsigned* amax)
{
    __shared__ unsigned partial[kThreads];
    partial[threadIdx.x] = mine;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            const unsigned other = partial[threadIdx.x + half];
            if (other > partial[threadIdx.x]) partial[threadIdx.x] = other;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && partial[0] != 0) atomicMax(amax, partial[0]);
}

// The delayed-scaling update's arguments; history null: a plain cast with amax.
struct Update {
    float* history;
    float* scale_inv;
    float* used_scale_inv;
    unsigned* blocks_done;
    int n_history;
    float numerator;
    int algo;
};

// After the block's atomicMax: the last block to finish runs the update (see the header).
__device__ __forceinline__ void update_if_last(const Update& u, float* scale, unsigned* amax)
{
    if (u.history == nullptr) return;
    __shared__ bool last;
    __threadfence();  // this block's amax is visible before its count is
    if (threadIdx.x == 0) last = atomicAdd(u.blocks_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();  // every other block's amax is visible from here
    delayed_scale_update(u.history, scale, u.scale_inv, u.used_scale_inv,
                         reinterpret_cast<float*>(amax), u.n_history, u.numerator, u.algo);
    if (threadIdx.x == 0) *u.blocks_done = 0u;  // for the next launch (a graph replays it)
}

// 4 elements of In as one load (16 bytes of float, 8 of half or bfloat16).
template <typename In>
struct alignas(4 * sizeof(In)) Four {
    In v[4];
};

}  // namespace

template <typename In>
__global__ void __launch_bounds__(kThreads)
    cast_fp8_amax(const In* __restrict__ x, float* scale, unsigned char* __restrict__ out,
                  unsigned* amax, long long n, int format, int saturate, float* history,
                  float* scale_inv, float* used_scale_inv, unsigned* blocks_done, int n_history,
                  float numerator, int algo)
{
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const float s = scale[0];
    unsigned mine = 0;
    const long long groups = n / 4;
    for (long long k = tid; k < groups; k += stride) {
        const Four<In> in = reinterpret_cast<const Four<In>*>(x)[k];
        unsigned word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j)  // little-endian: element 4k + j is byte j of the word
            word |= static_cast<unsigned>(convert(in.v[j], s, format, saturate, mine)) << 8 * j;
        reinterpret_cast<unsigned*>(out)[k] = word;
    }
    for (long long i = 4 * groups + tid; i < n; i += stride)
        out[i] = convert(x[i], s, format, saturate, mine);
    block_amax(mine, amax);
    const Update update{history, scale_inv, used_scale_inv, blocks_done, n_history, numerator,
                        algo};
    update_if_last(update, scale, amax);
}

// Four elements of a tile's row: one vector load when `vector` (the four are in x and
// 4 * sizeof(In)-aligned), else one by one as far as x goes (the first repeated past it).
template <typename In>
__device__ __forceinline__ Four<In> load_four(const In* __restrict__ x, long long at, int left,
                                              bool vector)
{
    if (vector) return *reinterpret_cast<const Four<In>*>(x + at);
    Four<In> in;
#pragma unroll
    for (int j = 0; j < 4; ++j) in.v[j] = x[at + (j < left ? j : 0)];
    return in;
}

// The first `left` bytes of `word` at dst[at]: one 4-byte store when `whole` (4 bytes, and
// `at` a multiple of 4), else byte by byte.
__device__ __forceinline__ void store_bytes(unsigned char* __restrict__ dst, long long at,
                                            unsigned word, int left, bool whole)
{
    if (whole) {
        *reinterpret_cast<unsigned*>(dst + at) = word;
        return;
    }
    for (int j = 0; j < left; ++j) dst[at + j] = static_cast<unsigned char>(word >> 8 * j);
}

template <typename In>
__global__ void __launch_bounds__(kThreads)
    cast_transpose_fp8_amax(const In* __restrict__ x, float* scale,
                            unsigned char* __restrict__ out, unsigned char* __restrict__ out_t,
                            unsigned* amax, int rows, int cols, int format, int saturate,
                            float* history, float* scale_inv, float* used_scale_inv,
                            unsigned* blocks_done, int n_history, float numerator, int algo)
{
    // The tile's FP8 bytes, a row of x per row, 4 to a word (byte j of word w: column
    // 4w + j); the 17th word of a row makes the column reads below meet at most 2 threads
    // per bank.
    __shared__ unsigned tile[kTransposeTile][kTransposeTile / 4 + 1];
    constexpr int kGroups = kTransposeTile / 4;        // 16 groups of 4 along a tile row
    constexpr int kPasses = kTransposeTile * kGroups / kThreads;  // 4 rows per thread
    const float s = scale[0];
    const int tiles_r = (rows + kTransposeTile - 1) / kTransposeTile;
    const int tiles_c = (cols + kTransposeTile - 1) / kTransposeTile;
    const int group = static_cast<int>(threadIdx.x) % kGroups;
    const int line = static_cast<int>(threadIdx.x) / kGroups;  // 16 lines per pass
    // Whole words where the dimension allows: a group of 4 columns (rows) then lies inside
    // x entirely or not at all, since each tile starts at a multiple of 4.
    const bool words_along_rows =
        cols % 4 == 0 && reinterpret_cast<unsigned long long>(x) % sizeof(Four<In>) == 0;
    const bool words_along_columns = rows % 4 == 0;
    unsigned mine = 0;
    for (int t = static_cast<int>(blockIdx.x); t < tiles_r * tiles_c;
         t += static_cast<int>(gridDim.x)) {
        const int r0 = t / tiles_c * kTransposeTile, c0 = t % tiles_c * kTransposeTile;
        const int c = c0 + 4 * group;
        // Read the tile along x's rows, every load issued before the first conversion; write
        // `out` along the same rows, 4 bytes at a time, and keep the bytes in the tile.
        Four<In> in[kPasses];
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const int r = r0 + line + p * (kThreads / kGroups);
            if (r < rows && c < cols)
                in[p] = load_four(x, static_cast<long long>(r) * cols + c, cols - c,
                                  words_along_rows);
        }
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const int i = line + p * (kThreads / kGroups), r = r0 + i;
            if (r >= rows || c >= cols) continue;
            const int left = cols - c < 4 ? cols - c : 4;
            unsigned word = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j)  // little-endian: column c + j is byte j of the word
                if (j < left)
                    word |= static_cast<unsigned>(convert(in[p].v[j], s, format, saturate, mine))
                            << 8 * j;
            store_bytes(out, static_cast<long long>(r) * cols + c, word, left, words_along_rows);
            tile[i][group] = word;
        }
        __syncthreads();
        // Write out_t along its rows (x's columns): row c of out_t holds column c of x; each
        // thread gathers 4 of x's rows of one column into a word.
        const int r = r0 + 4 * group;
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            const int k = line + p * (kThreads / kGroups), column = c0 + k;
            if (column >= cols || r >= rows) continue;
            const int left = rows - r < 4 ? rows - r : 4;
            unsigned word = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (j < left) word |= (tile[4 * group + j][k / 4] >> 8 * (k % 4) & 0xFFu) << 8 * j;
            store_bytes(out_t, static_cast<long long>(column) * rows + r, word, left,
                        words_along_columns);
        }
        __syncthreads();
    }
    block_amax(mine, amax);
    const Update update{history, scale_inv, used_scale_inv, blocks_done, n_history, numerator,
                        algo};
    update_if_last(update, scale, amax);
}

// Explicit instantiations for `nvcc -c` (CI's build); NVRTC instantiates the name expressions
// backend/fp8_kernels.py registers.
#ifndef __CUDACC_RTC__
#define CAST_FP8_INSTANTIATE(IN)                                                              \
    template __global__ void cast_fp8_amax<IN>(const IN*, float*, unsigned char*, unsigned*,  \
                                               long long, int, int, float*, float*, float*,   \
                                               unsigned*, int, float, int);                   \
    template __global__ void cast_transpose_fp8_amax<IN>(                                     \
        const IN*, float*, unsigned char*, unsigned char*, unsigned*, int, int, int, int,      \
        float*, float*, float*, unsigned*, int, float, int);
CAST_FP8_INSTANTIATE(float)
CAST_FP8_INSTANTIATE(__half)
CAST_FP8_INSTANTIATE(__nv_bfloat16)
#undef CAST_FP8_INSTANTIATE
#endif
