// amp.cu: the kernels of dynamic loss scaling, so that GradScaler never waits for the host.
// One step runs them in this order: scale_loss (GradScaler.scale, described at the kernel),
// inverse_scale_and_clear, unscale_and_check (once per gradient dtype), update_loss_scaling.
//
// 1. inverse_scale: ONE thread writes inv_scale = float(1 / double(scale)): the quotient in
//    double, rounded once to the nearest float, ties to even (exact for powers of two).
//    Every float32 input gives the twin's bits: subnormal scales and quotients (1 / 3e38),
//    0 (inf), inf (0), negative scales and NaN (see "float32 under -ftz" below).
//    Launch: grid (1,), block (1,). Args: scale float32 [1], inv_scale float32 [1] (written).
//    inverse_scale_and_clear does the same and also sets found_inf (bool [1]) to false:
//    GradScaler.unscale_ starts each step with it, one launch instead of a fill and this.
//    It stays a launch of its own (about 15 us of host time per unscale_): GradScaler
//    writes the scale from the host too (set_init_loss_scaling, load_state_dict, and a
//    static scale is never updated), so an inverse kept by update_loss_scaling could be
//    stale; folding the division into unscale_and_check would change that kernel's inputs
//    and compute it once per block instead of once.
//
// 2. unscale_and_check<T>: multi-tensor "g = g * inv_scale; found_inf |= !isfinite(g)".
//    ONE launch handles every gradient of one dtype T (__half, __nv_bfloat16, float or
//    double), in place.
//      - T = __half: g is widened to float, multiplied by inv_scale in float, rounded to
//        nearest even back to half (__float2half_rn);
//      - T = __nv_bfloat16: the same with __float2bfloat16_rn (a CuPy >= 14 bfloat16 array);
//      - T = float: one float multiply;  T = double: (double)inv_scale * g.
//    NOTE: finiteness is judged on the value just written, AFTER narrowing: a finite half
//    such as 40000 times an inv_scale of 2 becomes inf only here, and must be found.
//    found_inf is only ever set (never cleared): the caller ORs several buckets into it.
//
//    The chunk table. Gradients have any sizes (0, 1, 17 million), so the work is cut into
//    chunks of kChunk elements and block b handles exactly one chunk. The launcher builds one
//    int64 table on the host with NumPy and uploads it once per set of gradients
//    (kernels.device_table keeps it on the device; the next step's gradients, in the same
//    buffers, reuse it, so a step uploads nothing and can be captured in a CUDA graph):
//        table[0      : T)        data pointer of tensor t (as an integer)
//        table[T      : 2T)       element count of tensor t
//        table[2T     : 2T+C)     chunk c -> its tensor t
//        table[2T+C   : 2T+2C)    chunk c -> its first element (a multiple of kChunk)
//    (T tensors with at least one element, C chunks in all; empty tensors get no chunk.)
//    Inside a chunk the block strides over 16-byte vectors (8 halves / 4 floats / 2 doubles)
//    when the tensor's base pointer is 16-byte aligned (chunk starts keep that alignment, as
//    kChunk is a multiple of every vector width), else over single elements. Each block
//    ORs its threads' verdicts with __syncthreads_or and thread 0 stores the flag once.
//
//    Launch: grid (C,), block (kThreads = 512,). Args: table int64 [2T+2C], n_tensors and
//    n_chunks int32, inv_scale float32 [1], found_inf bool [1].
//
// 3. update_loss_scaling: ONE thread moves the loss scale and its two step counters along
//    the dynamic rule (overflow: good = 0, bad += 1, shrink every decr_every_n_nan_or_inf bad
//    steps in a row, floored at min_loss_scaling but never above the scale itself, so a scale
//    already under the floor holds; clean: bad = 0, good += 1, grow every
//    incr_every_n_steps clean steps, capped at max_loss_scaling, and never into inf), then
//    counts the overflowing updates at the floor: at_floor += 1 when the step overflowed
//    and the scale just written is <= min_loss_scaling, else at_floor = 0 (GradScaler's
//    floor warning reads it, deferred). GradScaler needs both after every update, so one
//    launch does both.
//    Launch: grid (1,), block (1,). Args: found_inf bool [1], scale float32 [1], good_steps,
//    bad_steps, at_floor int32 [1] (updated in place), the two step counts as int64, and
//    the ratios and bounds as float32 (each rounded to float32 on the host, as the twin
//    does). The int32 counters wrap like NumPy's.
//
// float32 under -ftz. CuPy compiles every kernel with -ftz=true (appended after the
// loader's options), so float32 arithmetic, comparisons and float <-> double conversions
// flush subnormals to zero: (double)x reads a subnormal scale as 0, (float)d writes a
// subnormal quotient as 0, and x <= floor compares two subnormals as 0 <= 0. The one-thread
// kernels promise the twin's bits for every float32, so their float32 values pass through
// exact_double (built from the bits) and nearest_float (subnormal results built as bits),
// and their products are taken in double, where the product of two floats is exact, then
// rounded once: the float product itself. unscale_and_check keeps plain float arithmetic;
// a float32 gradient whose unscaled value is subnormal becomes 0 on the GPU.
//
// Python callers: minitorch_amp/backend/loss_scaling.py (inverse_scale, unscale_and_check) and
// backend/scale_update.py (update_loss_scaling), on CuPy arrays when backend.kernels.enabled().
// NumPy twins (the specification): the same three functions on NumPy arrays.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {

constexpr long long kChunk = 65536;  // elements per block
constexpr int kThreads = 512;        // the launcher's block size (a multiple of 32)

// One element: multiply in the accumulation type, narrow, and say whether it is inf/NaN
// (an all-ones exponent in the stored format).
__device__ __forceinline__ __half unscale(__half g, float inv, bool& bad)
{
    const __half out = __float2half_rn(__half2float(g) * inv);
    bad |= (__half_as_ushort(out) & 0x7c00u) == 0x7c00u;
    return out;
}
__device__ __forceinline__ __nv_bfloat16 unscale(__nv_bfloat16 g, float inv, bool& bad)
{
    const __nv_bfloat16 out = __float2bfloat16_rn(__bfloat162float(g) * inv);
    bad |= (__bfloat16_as_ushort(out) & 0x7f80u) == 0x7f80u;
    return out;
}
__device__ __forceinline__ float unscale(float g, float inv, bool& bad)
{
    const float out = g * inv;
    bad |= (__float_as_uint(out) & 0x7f800000u) == 0x7f800000u;
    return out;
}
__device__ __forceinline__ double unscale(double g, float inv, bool& bad)
{
    const double out = g * static_cast<double>(inv);
    bad |= (__double_as_longlong(out) & 0x7ff0000000000000ll) == 0x7ff0000000000000ll;
    return out;
}

// x's exact value, subnormals included: a float is k * 2**-149 when its exponent field is 0.
__device__ __forceinline__ double exact_double(float x)
{
    const unsigned int bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) != 0u) return static_cast<double>(x);  // normal, inf or NaN
    const double magnitude = static_cast<double>(bits & 0x007fffffu) * 0x1p-149;
    return (bits & 0x80000000u) ? -magnitude : magnitude;  // -0.0 stays -0.0
}

// d rounded to the nearest float, ties to even, as NumPy's astype(float32) rounds. Below
// 2**-126 the result is k * 2**-149 with k = |d| * 2**149 rounded to the nearest integer
// (exact scaling, one rounding; k = 2**23 carries into the exponent: 2**-126, as it must).
__device__ __forceinline__ float nearest_float(double d)
{
    const double magnitude = fabs(d);
    if (!(magnitude < 0x1p-126)) return static_cast<float>(d);  // normal, inf, NaN, overflow
    const unsigned int sign = static_cast<unsigned int>(__double2hiint(d)) & 0x80000000u;
    return __uint_as_float(sign | __double2uint_rn(magnitude * 0x1p149));
}

// a * b as float32 multiplies, subnormals included: the double product is exact (24 + 24
// significant bits), so rounding it once gives the correctly rounded float product.
__device__ __forceinline__ float multiply(float a, float b)
{
    return nearest_float(exact_double(a) * exact_double(b));
}

// NumPy's maximum/minimum: a NaN in either argument is the result. Compared exactly.
__device__ __forceinline__ float nan_max(float a, float b)
{
    return (a != a || exact_double(a) >= exact_double(b)) ? a : b;
}
__device__ __forceinline__ float nan_min(float a, float b)
{
    return (a != a || exact_double(a) <= exact_double(b)) ? a : b;
}

// int32 + 1 that wraps like NumPy's int32 arithmetic (signed overflow is undefined in C++).
__device__ __forceinline__ int wrapping_increment(int x)
{
    return static_cast<int>(static_cast<unsigned int>(x) + 1u);
}

}  // namespace

template <typename T>
__global__ void __launch_bounds__(kThreads)
    unscale_and_check(const long long* __restrict__ table, int n_tensors, int n_chunks,
                      const float* __restrict__ inv_scale, bool* __restrict__ found_inf)
{
    constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte vector
    static_assert(kChunk % kVec == 0, "chunks must keep 16-byte alignment");

    const long long* sizes = table + n_tensors;
    const long long* chunk_tensor = table + 2 * n_tensors;
    const long long* chunk_begin = chunk_tensor + n_chunks;

    const int t = static_cast<int>(chunk_tensor[blockIdx.x]);
    T* g = reinterpret_cast<T*>(table[t]);
    __builtin_assume(__isGlobal(g));  // lets the compiler emit ld.global, not generic ld
    const long long begin = chunk_begin[blockIdx.x];
    const long long end = (sizes[t] - begin < kChunk) ? sizes[t] : begin + kChunk;
    const float inv = *inv_scale;
    bool bad = false;

    long long scalar_from = begin;  // where the element-by-element loop starts
    if ((reinterpret_cast<unsigned long long>(g) & 15ull) == 0) {
        const long long n_vec = (end - begin) / kVec;
        uint4* vec = reinterpret_cast<uint4*>(g + begin);
        for (long long k = threadIdx.x; k < n_vec; k += blockDim.x) {
            union {
                uint4 word;
                T v[kVec];
            } u;
            u.word = vec[k];
#pragma unroll
            for (int j = 0; j < kVec; ++j) u.v[j] = unscale(u.v[j], inv, bad);
            vec[k] = u.word;
        }
        scalar_from = begin + n_vec * kVec;
    }
    for (long long i = scalar_from + threadIdx.x; i < end; i += blockDim.x) {
        g[i] = unscale(g[i], inv, bad);
    }
    // Every thread reaches this barrier (no early return above).
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = true;
}

// float(1 / double(scale)), rounded once (IEEE double division), exact under -ftz.
__device__ __forceinline__ void invert(const float* __restrict__ scale,
                                       float* __restrict__ inv_scale)
{
    *inv_scale = nearest_float(1.0 / exact_double(*scale));
}

extern "C" __global__ void inverse_scale(const float* __restrict__ scale,
                                         float* __restrict__ inv_scale)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    invert(scale, inv_scale);
}

extern "C" __global__ void inverse_scale_and_clear(const float* __restrict__ scale,
                                                   float* __restrict__ inv_scale,
                                                   bool* __restrict__ found_inf)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    invert(scale, inv_scale);
    *found_inf = false;  // the step's unscale_and_check launches OR into it after this
}

// GradScaler.scale's product: out = loss * scale (one float32 multiply, rounded to nearest,
// -ftz as every kernel here) and saved = scale, the factor the product's backward multiplies
// by, kept apart from the scale that update_loss_scaling later changes in place. ONE thread;
// one launch where CuPy took two (a copy of the scale, then the product).
// Launch: grid (1,), block (1,). Args: loss float32 [1] (a 0-d loss), scale float32 [1],
// out float32 [1] and saved float32 [1] (both written).
extern "C" __global__ void scale_loss(const float* __restrict__ loss,
                                      const float* __restrict__ scale, float* __restrict__ out,
                                      float* __restrict__ saved)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const float factor = *scale;
    *saved = factor;
    *out = __fmul_rn(*loss, factor);
}

extern "C" __global__ void update_loss_scaling(const bool* __restrict__ found_inf,
                                               float* __restrict__ scale,
                                               int* __restrict__ good_steps,
                                               int* __restrict__ bad_steps,
                                               int* __restrict__ at_floor,
                                               long long incr_every_n_steps,
                                               long long decr_every_n_nan_or_inf,
                                               float incr_ratio, float decr_ratio,
                                               float min_loss_scaling, float max_loss_scaling)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const bool overflow = *found_inf;
    const float s = *scale;

    const int bad = overflow ? wrapping_increment(*bad_steps) : 0;
    const int good = overflow ? 0 : wrapping_increment(*good_steps);
    const bool decrease = overflow && bad == decr_every_n_nan_or_inf;
    const bool increase = !overflow && good == incr_every_n_steps;

    // An overflow never grows the scale: one under the floor holds (the twin's minimum).
    const float shrunk = nan_min(nan_max(multiply(s, decr_ratio), min_loss_scaling), s);
    const float grown = nan_min(multiply(s, incr_ratio), max_loss_scaling);
    const bool grown_finite = (__float_as_uint(grown) & 0x7f800000u) != 0x7f800000u;

    const float next = decrease ? shrunk : ((increase && grown_finite) ? grown : s);
    *scale = next;
    *bad_steps = decrease ? 0 : bad;
    *good_steps = increase ? 0 : good;  // reset even when growing was refused (inf)
    // The floor counter reads the scale just written.
    const bool stuck = overflow && exact_double(next) <= exact_double(min_loss_scaling);
    *at_floor = stuck ? wrapping_increment(*at_floor) : 0;
}

// The four gradient dtypes, instantiated explicitly so that nvcc builds (and CI checks) them
// too; the loader names the same instantiations in its name expressions.
template __global__ void unscale_and_check<__half>(const long long*, int, int, const float*,
                                                   bool*);
template __global__ void unscale_and_check<__nv_bfloat16>(const long long*, int, int,
                                                         const float*, bool*);
template __global__ void unscale_and_check<float>(const long long*, int, int, const float*,
                                                  bool*);
template __global__ void unscale_and_check<double>(const long long*, int, int, const float*,
                                                   bool*);
