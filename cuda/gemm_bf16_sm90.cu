// gemm_bf16_sm90.cu: the Hopper GEMM for bfloat16 operands (and bfloat16 or float32 results).
//
// WHAT IT COMPUTES: gemm_sm90.cu's specification with In = __nv_bfloat16, OutT bf16 or float:
//
//     C = epilogue(alpha * op(A) @ op(B)),  epilogue(v) = relu?(OutT(v + beta * C_in) + bias[n])
//
//   Products of two bfloat16 values (8 significant bits each) are exact in float32, sums are
//   float32, the epilogue is float32; with a bias the product is rounded to OutT before the
//   add (a matmul, then an add: Paddle's F.linear), and the result is rounded to OutT
//   (bfloat16: __float2bfloat16_rn, round to nearest even; beyond (2 - 2^-8) * 2^127 it is
//   inf). The NumPy twin is backend/gemm.py's twin() with out_dtype=bfloat16 or float32.
//
// HOW: nothing new runs here. gemm_sm90.cu is included unchanged: its kernel is a template
//   on the input type, and Wgmma<__nv_bfloat16> makes every wgmma the bfloat16 instruction
//   (wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16): the same 64 x 128 x 16 shape,
//   the same shared-memory layout and descriptors (both types are 2 bytes), the same
//   accumulator fragment. TMA copies bytes, so the tensor maps are the float16 ones. What a
//   bfloat16 *result* needs is the epilogue's load and store of OutT (one value, and the
//   interior tiles' pair of neighbours), which gemm_sm90.cu writes for __half and float only:
//   the explicit specialisations below supply them (they must come before the
//   instantiations, and do: nothing in the included file uses them).
//
// LAUNCH: exactly gemm_sm90.cu's (backend/gemm_bf16_sm90.py, which reuses gemm_sm90.py's
//   plan, tensor maps and shared-memory sizes). Needs sm_90a.
//
// LOADING: NVRTC compiles a string, so the loader inlines the quoted include below into this
//   file's text (backend/kernels.py, KernelFile.source); nvcc follows the include itself.

#define GEMM_SM90_INCLUDED  // its pipeline, not its instantiations (compiled with it)
#include "gemm_sm90.cu"

#ifndef MINITORCH_GEMM_HOST_EMULATION

template <>
__device__ __forceinline__ float load_out<__nv_bfloat16>(const __nv_bfloat16* p) {
    return __bfloat162float(*p);
}

template <>
__device__ __forceinline__ void store_out<__nv_bfloat16>(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
}

template <>
struct Pair<__nv_bfloat16> {  // two neighbours of a row as one 4-byte store, each rounded once
    using type = __nv_bfloat162;
    static __device__ __forceinline__ type make(float a, float b) {
        return __floats2bfloat162_rn(a, b);  // a in the low half: the lower address
    }
};

// Explicit instantiations, so `nvcc -c` builds (and CI spill-checks) what
// backend/gemm_bf16_sm90.py registers; gemm_sm90.cu already instantiates the float32-output
// 128-wide ones. NVRTC instantiates only the name expressions.
#ifndef __CUDACC_RTC__
#define GEMM_BF16_SM90_INSTANTIATE(TA, TB, OUT, BN_, PP)                                    \
    template __global__ void gemm_sm90<TA, TB, OUT, __nv_bfloat16, BN_, PP>(                \
        const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, OUT*,         \
        const OUT*, float*, unsigned*, int, int, int, int, float, float, int, int);
#define GEMM_BF16_SM90_LAYOUTS(OUT, BN_, PP)                   \
    GEMM_BF16_SM90_INSTANTIATE(false, false, OUT, BN_, PP)     \
    GEMM_BF16_SM90_INSTANTIATE(false, true, OUT, BN_, PP)      \
    GEMM_BF16_SM90_INSTANTIATE(true, false, OUT, BN_, PP)
GEMM_BF16_SM90_LAYOUTS(__nv_bfloat16, 128, false)
GEMM_BF16_SM90_LAYOUTS(__nv_bfloat16, 256, false)
GEMM_BF16_SM90_LAYOUTS(__nv_bfloat16, 128, true)
GEMM_BF16_SM90_LAYOUTS(float, 256, false)
GEMM_BF16_SM90_LAYOUTS(float, 128, true)
#undef GEMM_BF16_SM90_LAYOUTS
#undef GEMM_BF16_SM90_INSTANTIATE
#endif  // __CUDACC_RTC__

#endif  // MINITORCH_GEMM_HOST_EMULATION
