// fp8_scale.cu: Transformer Engine's delayed-scaling update of one FP8 tensor role, in ONE
// launch, after the cast (fp8_cast.cu) has folded this step's amax into *amax.
//
//   amax_history[0] = amax[0], and amax[0] = 0     (when amax is not null: the state's own
//                                                    slot, which the next cast folds into;
//                                                    null: amax_history[0] holds the amax)
//   used_scale_inv[0] = scale_inv[0]                (the inverse the cast just used, copied
//                                                    before the update overwrites it)
//   amax  = max(amax_history)   (algo 0, 'max': a NaN anywhere makes it NaN, as NumPy's max)
//         = amax_history[0]     (algo 1, 'most_recent')
//   scale = fresh(amax)  where 0 < amax < inf, else unchanged (NaN, inf, 0, negative amax)
//           fresh(amax) = numerator / amax rounded once to float32, float32's largest value
//           where that is inf (a tiny amax, as Transformer Engine clamps it)
//   scale_inv = 1 / scale rounded once to float32 (a NaN scale's inverse is that NaN, quiet)
//   amax_history rotated by -1 (entry 0, this step's amax, moves to the end) and entry 0 = 0
//
//   numerator = float32(fp8_max * 2**-margin), rounded on the host in float64 first, as the
//   twin rounds it (the launcher passes it in).
//
// float32 under -ftz. CuPy compiles every kernel with -ftz=true, under which float
// arithmetic, comparisons and conversions read and write subnormals as 0 (and __fdiv_rn is
// div.rn.ftz.f32): a subnormal amax would compare as 0 and keep the old scale, a subnormal
// quotient would become 0. The twin keeps subnormals, so here nothing float32 is compared or
// divided: the maximum is taken on the bits (an order-preserving key, every NaN on top), the
// tests on amax read its bits, and the divisions go through exact doubles (exact_double)
// rounded once to float32 (nearest_float), as cuda/amp.cu's inverse of the loss scale.
// A float32 quotient taken in double and rounded to float32 is the correctly rounded float32
// quotient (53 >= 2 * 24 + 2: double rounding is innocuous for division).
//
// NOTE: the cast folds into a slot of its own, not into amax_history[0]: that entry is 0 after
// every update, but a loaded state (a current-scaling checkpoint resumed with a history of 1)
// may hold an amax there, which the twin overwrites and a fold would keep.
//
// The rotation reads before it writes: entry 0 is kept in a register, then the block moves
// entries i + 1 -> i in strides of kScaleThreads (each stride read in full, a barrier, then
// written: a later stride reads only entries no earlier one writes), then thread 0 writes
// entry n - 1 and zeroes entry 0. Any history length works (TE's default is 1024).
//
// The update is also the tail of fp8_cast.cu's casts (which include this file): the cast's
// last block to finish runs delayed_scale_update() on the amax all its blocks folded in, so a
// delayed cast and its update are one launch; this kernel remains for the casts that cannot
// take it (an empty tensor, an amax reduced over ranks in between).
//
// LAUNCH (backend/fp8_scale.py): grid (1,), block (kScaleThreads = 256,). Args: amax_history
//   float [n], scale float [1], scale_inv float [1] (all updated in place), used_scale_inv
//   float [1] (written), amax float [1] or null (read, then zeroed), n int32 >= 1,
//   numerator float, algo int32 (0 'max', 1 'most_recent').
//
// Python caller: minitorch_amp/amp/fp8/scaling.py (ScalingState.cast, delayed scaling, on
// CuPy arrays). NumPy twin (the specification): backend/fp8_scale.py's twin_update, which is
// amp/fp8/scaling.py's update_amax_history_and_scale.

namespace {

constexpr int kScaleThreads = 256;  // the block delayed_scale_update() runs in

// x's exact value, subnormals included: a float is k * 2**-149 when its exponent field is 0.
__device__ __forceinline__ double exact_double(float x)
{
    const unsigned int bits = __float_as_uint(x);
    if ((bits & 0x7f800000u) != 0u) return static_cast<double>(x);  // normal, inf or NaN
    const double magnitude = static_cast<double>(bits & 0x007fffffu) * 0x1p-149;
    return (bits & 0x80000000u) ? -magnitude : magnitude;  // -0.0 stays -0.0
}

// d rounded to the nearest float, ties to even, as NumPy's float32 arithmetic rounds. Below
// 2**-126 the result is k * 2**-149 with k = |d| * 2**149 rounded to the nearest integer.
__device__ __forceinline__ float nearest_float(double d)
{
    const double magnitude = fabs(d);
    if (!(magnitude < 0x1p-126)) return static_cast<float>(d);  // normal, inf, overflow
    const unsigned int sign = static_cast<unsigned int>(__double2hiint(d)) & 0x80000000u;
    return __uint_as_float(sign | __double2uint_rn(magnitude * 0x1p149));
}

__device__ __forceinline__ bool is_nan(unsigned int bits)
{
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

// A key whose unsigned order is the floats' numeric order (-0 just below +0), every NaN
// above everything: the maximum key is NumPy's max, NaN propagating.
__device__ __forceinline__ unsigned int order_key(unsigned int bits)
{
    if (is_nan(bits)) return 0xffffffffu;
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ unsigned int from_key(unsigned int key)
{
    if (key == 0xffffffffu) return 0x7fc00000u;  // a NaN (only its NaN-ness is read)
    return (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
}

// The new scale's bits from the amax's bits (the old scale where amax is not in (0, inf)).
__device__ __forceinline__ unsigned int next_scale(unsigned int amax, unsigned int scale,
                                                   float numerator)
{
    if (amax == 0u || amax >= 0x7f800000u) return scale;  // 0, inf, NaN, any negative
    const double quotient = exact_double(numerator) / exact_double(__uint_as_float(amax));
    const float fresh = nearest_float(quotient);
    const unsigned int bits = __float_as_uint(fresh);
    return bits == 0x7f800000u ? 0x7f7fffffu : bits;  // inf -> float32's largest
}

// 1 / scale rounded once to float32; a NaN scale gives itself, quietened (as x86 does).
__device__ __forceinline__ unsigned int inverse_bits(unsigned int scale)
{
    if (is_nan(scale)) return scale | 0x00400000u;
    return __float_as_uint(nearest_float(1.0 / exact_double(__uint_as_float(scale))));
}

// The whole update, run by one block of kScaleThreads threads (every thread calls it).
// NOTE: the slot is read through a volatile pointer: in a cast's last block it holds what
// the other blocks' atomicMax wrote, which a cached load could miss.
__device__ __forceinline__ void delayed_scale_update(float* __restrict__ amax_history,
                                                     float* scale, float* __restrict__ scale_inv,
                                                     float* __restrict__ used_scale_inv,
                                                     float* amax, int n, float numerator,
                                                     int algo)
{
    __shared__ unsigned int keys[kScaleThreads];
    unsigned int* history = reinterpret_cast<unsigned int*>(amax_history);
    unsigned int* slot = reinterpret_cast<unsigned int*>(amax);
    const int t = static_cast<int>(threadIdx.x);
    // this step's amax, read before any write: entry 0 of the history the update sees
    const unsigned int first =
        slot != nullptr ? *reinterpret_cast<volatile unsigned int*>(slot) : history[0];

    // 1. The amax: every thread's maximum key over its strided entries, then a tree.
    unsigned int mine = 0u;  // below every float's key
    for (int i = t; i < n; i += kScaleThreads) {
        const unsigned int key = order_key(i == 0 ? first : history[i]);
        mine = key > mine ? key : mine;
    }
    keys[t] = mine;
    __syncthreads();
    for (int half = kScaleThreads / 2; half > 0; half /= 2) {
        if (t < half && keys[t + half] > keys[t]) keys[t] = keys[t + half];
        __syncthreads();
    }

    // 2. The scale and its inverse (one thread; every thread has read the history).
    if (t == 0) {
        const unsigned int chosen = algo == 0 ? from_key(keys[0]) : first;
        const unsigned int* old_inv = reinterpret_cast<const unsigned int*>(scale_inv);
        reinterpret_cast<unsigned int*>(used_scale_inv)[0] = old_inv[0];
        const unsigned int s = next_scale(chosen, __float_as_uint(scale[0]), numerator);
        reinterpret_cast<unsigned int*>(scale)[0] = s;
        reinterpret_cast<unsigned int*>(scale_inv)[0] = inverse_bits(s);
    }
    __syncthreads();

    // 3. Rotate by -1: entries 1 .. n-1 move down one, stride by stride, reading first.
    for (int base = 0; base < n - 1; base += kScaleThreads) {
        const int i = base + t;
        const unsigned int moved = i < n - 1 ? history[i + 1] : 0u;
        __syncthreads();
        if (i < n - 1) history[i] = moved;
        __syncthreads();
    }
    if (t == 0) {
        history[n - 1] = first;
        history[0] = 0u;  // (n = 1: the only entry)
        if (slot != nullptr) slot[0] = 0u;  // the slot the next cast folds its amax into
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kScaleThreads)
    fp8_delayed_scale_update(float* __restrict__ amax_history, float* __restrict__ scale,
                             float* __restrict__ scale_inv, float* __restrict__ used_scale_inv,
                             float* __restrict__ amax, int n, float numerator, int algo)
{
    delayed_scale_update(amax_history, scale, scale_inv, used_scale_inv, amax, n, numerator,
                         algo);
}
