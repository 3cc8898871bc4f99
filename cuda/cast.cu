// cast.cu: float32 <-> float16 and float32 <-> bfloat16 elementwise casts, 16-byte
// vectorised, with an optional device-side overflow flag; two float32 arrays in one launch.
//
// What it computes
//   cast_f32_to_f16        dst[i] = __float2half_rn(src[i])   round to nearest even
//   cast_f32_to_f16_check  the same, and *found_inf = true when any dst[i] is inf or NaN
//   cast_f16_to_f32        dst[i] = __half2float(src[i])      exact (every half is a float)
//   cast_f16_to_f32_check  the same, and *found_inf = true when any dst[i] is inf or NaN
//   cast_f32_to_bf16[_check]  dst[i] = __float2bfloat16_rn(src[i])  round to nearest even;
//                          at or above (2 - 2^-8) * 2^127 it becomes +-inf, NaN stays NaN
//   cast_bf16_to_f32[_check]  dst[i] = __bfloat162float(src[i])      exact (a shift by 16)
//   cast_pair_f32_to_f16   dst0[i] = __float2half_rn(src0[i]) for i < n0, and
//                          dst1[i] = __float2half_rn(src1[i]) for i < n1: the two plain casts
//                          of a white-list op's float32 inputs (x and W) in one launch
//   cast_pair_f32_to_bf16  the same with __float2bfloat16_rn (no found_inf variant)
//
//   Rounding is IEEE round-to-nearest-even: a float32 at or above 65520 (65504 plus half an
//   ulp) becomes +-inf, NaN stays NaN (its payload and sign are not specified), float16
//   subnormals (2^-24 .. 1023 * 2^-24) come out exact, and halfway cases go to the even
//   neighbour. Nothing here is compiled with fast math, so nothing flushes to zero.
//   found_inf is only ever set, never cleared: callers OR several checks into one flag.
//
// Launch shape
//   1-D grid-stride: block (256,), grid (min(ceil(n / 2048), 4096),). Any grid works; the
//   loops below stride by the whole grid. One thread converts 8 elements per step: 16 bytes
//   of half and 32 bytes of float, loaded and stored as uint4 (16-byte) words.
//   The pair kernels take one grid for both arrays, split at blocks0 (0 < blocks0 < grid):
//   blocks [0, blocks0) cast array 0 exactly as a plain kernel with a grid of blocks0 would,
//   blocks [blocks0, grid) cast array 1 as a grid of grid - blocks0, their index rebased to
//   start at 0; each part keeps the vector path and the head and tail below. The launcher
//   gives each array its plain grid, ceil(n / 2048), while the two fit in 4096 blocks; past
//   that it splits 4096 blocks in proportion to n0 and n1, at least one each.
//
// Alignment and tails (any length, any offset)
//   A CuPy view such as x[3:] starts 12 bytes into its allocation, so 16-byte accesses are
//   only legal from the first index h where BOTH src + h and dst + h are 16-byte aligned.
//   Elements [0, h) are the scalar head, then whole 8-element vectors, then a scalar tail of
//   fewer than 8. When no such h exists (src and dst misaligned differently, e.g. a float
//   view offset by one element into a fresh half array) every element takes the scalar
//   path: still coalesced, just more instructions per byte.
//
// Dtypes: float* <-> __half* or __nv_bfloat16* (C-contiguous), n as int64 (long long),
// found_inf bool [1], blocks0 int32. A bfloat16 array is a CuPy array of ml_dtypes.bfloat16 (CuPy >= 14);
// the kernel reads its bytes as __nv_bfloat16.
//
// Python caller: minitorch_amp/backend/cast.py, cast(x, dtype, found_inf=None), and
//   cast_pair(a, b, dtype) for the pair kernels.
// NumPy twin (the specification): the same function on NumPy arrays,
//   x.astype(dtype), and found_inf |= not isfinite(result).all(); for a pair,
//   (a.astype(dtype), b.astype(dtype)).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr int kVec = 8;  // elements per vector step

// convert<Dst>(x): the one rounding of each direction (the result type picks the overload).
template <typename Dst, typename Src>
__device__ __forceinline__ Dst convert(Src x);
template <>
__device__ __forceinline__ __half convert<__half, float>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ float convert<float, __half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16, float>(float x)
{
    return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ float convert<float, __nv_bfloat16>(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}

// Non-finite (inf or NaN) means an all-ones exponent.
__device__ __forceinline__ bool non_finite(__half x)
{
    return (__half_as_ushort(x) & 0x7c00u) == 0x7c00u;
}
__device__ __forceinline__ bool non_finite(__nv_bfloat16 x)
{
    return (__bfloat16_as_ushort(x) & 0x7f80u) == 0x7f80u;
}
__device__ __forceinline__ bool non_finite(float x)
{
    return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
}

template <typename T>
__device__ __forceinline__ bool aligned16(const T* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// 8 elements of T as whole 16-byte words (one for half, two for float).
template <typename T>
struct alignas(16) Vec {
    static constexpr int kWords = kVec * sizeof(T) / 16;
    T v[kVec];

    __device__ __forceinline__ void load(const T* p)
    {
        const uint4* src = reinterpret_cast<const uint4*>(p);
        uint4* words = reinterpret_cast<uint4*>(v);
#pragma unroll
        for (int w = 0; w < kWords; ++w) words[w] = src[w];
    }
    __device__ __forceinline__ void store(T* p) const
    {
        uint4* dst = reinterpret_cast<uint4*>(p);
        const uint4* words = reinterpret_cast<const uint4*>(v);
#pragma unroll
        for (int w = 0; w < kWords; ++w) dst[w] = words[w];
    }
};

// One array's cast by the blocks block = 0 .. blocks - 1 of a (sub)grid: a plain kernel passes
// blockIdx.x and gridDim.x, a pair kernel its own share of the grid, rebased to start at 0.
template <typename Src, typename Dst, bool kCheck>
__device__ __forceinline__ void cast_body(const Src* __restrict__ src, Dst* __restrict__ dst,
                                          long long n, bool* found_inf, unsigned int block,
                                          unsigned int blocks)
{
    const long long stride = static_cast<long long>(blocks) * blockDim.x;
    const long long tid = static_cast<long long>(block) * blockDim.x + threadIdx.x;
    bool bad = false;

    // The first index from which both pointers are 16-byte aligned (alignment repeats every
    // 8 elements, so checking 0..7 is enough); none: the whole array is "head".
    long long head = 0;
    while (head < kVec && !(aligned16(src + head) && aligned16(dst + head))) ++head;
    if (head == kVec || head > n) head = n;
    const long long n_vec = (n - head) / kVec;
    const long long tail = head + n_vec * kVec;

    for (long long i = tid; i < head; i += stride) {
        dst[i] = convert<Dst>(src[i]);
        if (kCheck) bad |= non_finite(dst[i]);
    }
    for (long long k = tid; k < n_vec; k += stride) {
        Vec<Src> in;
        Vec<Dst> out;
        in.load(src + head + k * kVec);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
            out.v[j] = convert<Dst>(in.v[j]);
            if (kCheck) bad |= non_finite(out.v[j]);
        }
        out.store(dst + head + k * kVec);
    }
    for (long long i = tail + tid; i < n; i += stride) {
        dst[i] = convert<Dst>(src[i]);
        if (kCheck) bad |= non_finite(dst[i]);
    }
    // NOTE: a plain store, no atomic: every writer stores the same value, and nobody clears.
    if (kCheck && bad) *found_inf = true;
}

// Two float32 arrays to Dst in one launch: blocks [0, blocks0) cast array 0 as a grid of
// blocks0 would, blocks [blocks0, gridDim.x) cast array 1 as a grid of gridDim.x - blocks0.
template <typename Dst>
__device__ __forceinline__ void cast_pair_body(const float* __restrict__ src0,
                                               Dst* __restrict__ dst0, long long n0,
                                               const float* __restrict__ src1,
                                               Dst* __restrict__ dst1, long long n1, int blocks0)
{
    const unsigned int first1 = static_cast<unsigned int>(blocks0);
    if (blockIdx.x < first1) {
        cast_body<float, Dst, false>(src0, dst0, n0, nullptr, blockIdx.x, first1);
    } else {
        cast_body<float, Dst, false>(src1, dst1, n1, nullptr, blockIdx.x - first1,
                                     gridDim.x - first1);
    }
}

}  // namespace

extern "C" __global__ void cast_f32_to_f16(const float* __restrict__ src,
                                           __half* __restrict__ dst, long long n)
{
    cast_body<float, __half, false>(src, dst, n, nullptr, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_f32_to_f16_check(const float* __restrict__ src,
                                                 __half* __restrict__ dst, long long n,
                                                 bool* found_inf)
{
    cast_body<float, __half, true>(src, dst, n, found_inf, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_f16_to_f32(const __half* __restrict__ src,
                                           float* __restrict__ dst, long long n)
{
    cast_body<__half, float, false>(src, dst, n, nullptr, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_f16_to_f32_check(const __half* __restrict__ src,
                                                 float* __restrict__ dst, long long n,
                                                 bool* found_inf)
{
    cast_body<__half, float, true>(src, dst, n, found_inf, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_f32_to_bf16(const float* __restrict__ src,
                                            __nv_bfloat16* __restrict__ dst, long long n)
{
    cast_body<float, __nv_bfloat16, false>(src, dst, n, nullptr, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_f32_to_bf16_check(const float* __restrict__ src,
                                                  __nv_bfloat16* __restrict__ dst, long long n,
                                                  bool* found_inf)
{
    cast_body<float, __nv_bfloat16, true>(src, dst, n, found_inf, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_bf16_to_f32(const __nv_bfloat16* __restrict__ src,
                                            float* __restrict__ dst, long long n)
{
    cast_body<__nv_bfloat16, float, false>(src, dst, n, nullptr, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_bf16_to_f32_check(const __nv_bfloat16* __restrict__ src,
                                                  float* __restrict__ dst, long long n,
                                                  bool* found_inf)
{
    cast_body<__nv_bfloat16, float, true>(src, dst, n, found_inf, blockIdx.x, gridDim.x);
}

extern "C" __global__ void cast_pair_f32_to_f16(const float* __restrict__ src0,
                                                __half* __restrict__ dst0, long long n0,
                                                const float* __restrict__ src1,
                                                __half* __restrict__ dst1, long long n1,
                                                int blocks0)
{
    cast_pair_body<__half>(src0, dst0, n0, src1, dst1, n1, blocks0);
}

extern "C" __global__ void cast_pair_f32_to_bf16(const float* __restrict__ src0,
                                                 __nv_bfloat16* __restrict__ dst0, long long n0,
                                                 const float* __restrict__ src1,
                                                 __nv_bfloat16* __restrict__ dst1, long long n1,
                                                 int blocks0)
{
    cast_pair_body<__nv_bfloat16>(src0, dst0, n0, src1, dst1, n1, blocks0);
}
