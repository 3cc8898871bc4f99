// gemm_fp8_sm90.cu: the Hopper FP8 GEMM: E4M3 / E5M2 operands, float32 accumulation, the
// inverse scales applied in the epilogue (what torch._scaled_mm computes with cuBLASLt).
//
// WHAT IT COMPUTES (the NumPy twin is backend/fp8_gemm.py, twin_gemm)
//
//     C[m][n] = OutT( (sum_k A[m][k] * Bt[n][k]) * (scale_a[0] * scale_b[0]) )
//     with a bias (not null, OutT [N]):
//     C[m][n] = OutT( float(OutT(that product)) + float(bias[n]) )
//
//   (a bias is added to the product as stored, in float32, and rounded again: an FP8
//   Linear's matmul, then Paddle's add, which NumPy and ml_dtypes compute in float32 for
//   float16 and bfloat16 alike; one launch and one pass over C fewer than the add's own.)
//   A is M x K and Bt is N x K, both row-major FP8 bytes: both operands K-MAJOR, the only
//   layout Hopper's 8-bit wgmma reads from shared memory (it has no transpose bit for 8-bit
//   types). A GEMM that has B as K x N first makes the transposed copy (fp8_cast.cu's
//   cast_transpose writes it while casting). A_FMT / B_FMT: 0 = E4M3, 1 = E5M2 (any pair).
//   Each product of two FP8 values is exact in float32; the sums are float32 (in the tensor
//   core's order, which is not NumPy's: compare with a tolerance unless the sums are exact).
//   scale_a and scale_b are the INVERSE scales (dequantisation factors), one float32 each,
//   read on the device: the step that made them never waits for the host. Their product is
//   rounded to float32 once, the accumulator multiplied by it and rounded to OutT (float,
//   __half or __nv_bfloat16: round to nearest even) once.
//
// HOW: gemm_sm90.cu's pipeline, included below and reused as it is: the producer warpgroup
//   streams TMA boxes through a ring of stages guarded by "full" / "empty" mbarriers, two
//   consumer warpgroups share each 128 x BN tile (the cooperative schedule, BN = 128 or
//   256), persistent CTAs walk the tiles in GROUP_M groups, and the epilogue goes straight
//   from the accumulators to global memory. What changes is the element size, and it changes
//   nothing in the byte layout:
//
//     a stage row is still 128 bytes of one row of K: 128 FP8 values instead of 64 halves;
//     a wgmma reads k32 (32 bytes) per row instead of k16 (also 32 bytes), so the four
//     k-slices of a stage start at the same byte offsets 0, 32, 64, 96, and gemm_sm90.cu's
//     K-major descriptors (desc_a<false>, desc_b<true>) describe them unchanged;
//     the tensor maps describe each row as K / 2 two-byte words (TMA copies bytes; zero fill
//     outside the matrix is +0.0 in FP8 too), so gemm_sm90.py's encoder builds them and the
//     producer's box coordinates are gemm_sm90.cu's, in words: x = 64 * k_block.
//
//   So a K block is 128 FP8 values, and each wgmma is m64n128k32 with FP8 inputs:
//     wgmma.mma_async.sync.aligned.m64n128k32.f32.<a>.<b>   (<a>, <b> in e4m3, e5m2)
//   with the same 64 x 128 float32 accumulator fragment as the 16-bit instruction.
//
// LAUNCH (backend/fp8_gemm.py, fp8_gemm): grid = (min(tiles, SMs), 1, 1), block = (384,),
//   dynamic shared memory = smem_bytes(BN) (gemm_sm90.cu's; opt-in above 48 KB). Needs
//   sm_90a and K % 16 == 0 (TMA: rows 16 bytes apart); M, N >= 1. Args: map_a, map_b (the
//   operands' tensor maps, in two-byte words), C OutT [M, ldc], bias OutT [N] or null,
//   scale_a, scale_b float [1] (device), M, N, K, ldc int32.
//
// HOST EMULATION: tests/fp8_gemm_emulator.cpp models the hardware layer (TMA, mbarriers, the
//   FP8 wgmma reading shared memory through the descriptors) and runs the 384 threads as
//   fibers (tests/test_fp8_gemm.py).

#define GEMM_SM90_INCLUDED  // its pipeline, not its instantiations (compiled with it)
#include "gemm_sm90.cu"

constexpr int FP8_K_BLOCK = 128;  // FP8 values per stage row (128 bytes, as 64 halves)
constexpr int FP8_K_SLICE = 32;   // K of one FP8 wgmma (32 bytes, as k16 of halves)

#ifndef MINITORCH_GEMM_HOST_EMULATION

#define WGMMA_FP8_D8(i)                                                                    \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),            \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_FP8_ASM(TYPES)                                                               \
    asm volatile(                                                                          \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                       \
        "wgmma.mma_async.sync.aligned.m64n128k32.f32." TYPES " "                           \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
        "%64, %65, p, 1, 1;\n}\n"                                                          \
        : WGMMA_FP8_D8(0), WGMMA_FP8_D8(8), WGMMA_FP8_D8(16), WGMMA_FP8_D8(24),            \
          WGMMA_FP8_D8(32), WGMMA_FP8_D8(40), WGMMA_FP8_D8(48), WGMMA_FP8_D8(56)            \
        : "l"(desc_a), "l"(desc_b), "r"(accumulate))

// d (64 x 128, float32) = A (64 x 32) @ B (32 x 128) + (accumulate ? d : 0), both operands
// K-major FP8 in shared memory; A_FMT / B_FMT pick the instruction (0 = e4m3, 1 = e5m2).
template <int A_FMT, int B_FMT>
__device__ __forceinline__ void wgmma_fp8_m64n128k32(float (&d)[64], unsigned long long desc_a,
                                                     unsigned long long desc_b, int accumulate) {
    if constexpr (A_FMT == 0 && B_FMT == 0) {
        WGMMA_FP8_ASM("e4m3.e4m3");
    } else if constexpr (A_FMT == 0) {
        WGMMA_FP8_ASM("e4m3.e5m2");
    } else if constexpr (B_FMT == 0) {
        WGMMA_FP8_ASM("e5m2.e4m3");
    } else {
        WGMMA_FP8_ASM("e5m2.e5m2");
    }
}
#undef WGMMA_FP8_ASM
#undef WGMMA_FP8_D8

#endif  // MINITORCH_GEMM_HOST_EMULATION

// The result's one rounding (float32 stays), and two row neighbours as one store.
__device__ __forceinline__ void store_fp8_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_fp8_out(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_fp8_out(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
}
// A bias entry in float32 (exact), to add to the stored product (round_to, gemm_sm90.cu's).
__device__ __forceinline__ float load_fp8_bias(const float* p) { return *p; }
__device__ __forceinline__ float load_fp8_bias(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_fp8_bias(const __nv_bfloat16* p) {
    return __bfloat162float(*p);
}
template <typename OutT>
__device__ __forceinline__ float with_bias(float v, const OutT* C, const OutT* bias) {
    return __fadd_rn(round_to(v, C), load_fp8_bias(bias));  // the product as OutT stores it
}
__device__ __forceinline__ void store_fp8_pair(float* p, float a, float b) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
__device__ __forceinline__ void store_fp8_pair(__half* p, float a, float b) {
    *reinterpret_cast<__half2*>(p) = __halves2half2(__float2half_rn(a), __float2half_rn(b));
}
__device__ __forceinline__ void store_fp8_pair(__nv_bfloat16* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

template <typename OutT, int A_FMT, int B_FMT, int BN>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_fp8_sm90(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                  OutT* C, const OutT* bias, const float* scale_a, const float* scale_b,
                  int M, int N, int K, int ldc) {
    constexpr int STAGES = stages_for(BN);
    constexpr int STAGE_BYTES = stage_bytes(BN);
    constexpr int A_BYTES = BM * BK * 2;
    constexpr int HALVES = BN / WG_N;  // wgmma per k32 slice
    static_assert(BN % WG_N == 0 && STAGES >= 2, "BN is 128 or 256");
    static_assert(BK * 2 == FP8_K_BLOCK && FP8_K_BLOCK / FP8_K_SLICE == BK / 16,
                  "a stage row is 128 bytes and four wgmma slices, as in gemm_sm90.cu");

    unsigned char* raw = dynamic_smem();
    const unsigned base = smem_address(raw);
    const unsigned tiles = (base + 1023u) & ~1023u;  // 128-byte swizzle: 1024-aligned boxes
    const unsigned full = tiles + STAGES * STAGE_BYTES;
    const unsigned empty = full + 8 * STAGES;

    const int tid = static_cast<int>(threadIdx.x);
    const int warpgroup = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);               // the producer's arrive (+ TMA bytes)
            mbar_init(empty + 8 * s, CONSUMERS);      // one arrive per consumer warpgroup
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int k_blocks = (K + FP8_K_BLOCK - 1) / FP8_K_BLOCK;
    const int units = tiles_m * tiles_n;

    if (warpgroup == 0) {  // ---- the producer: gemm_sm90.cu's, K-major boxes only ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (tid != 0) return;
        tma_prefetch(&map_a);
        tma_prefetch(&map_b);
        int it = 0;
        for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
            const Work w = work_unit(u, tiles_m, tiles_n, BN, 1, k_blocks, k_blocks);
            for (int kb = w.kb0; kb < w.kb1; ++kb, ++it) {
                const int s = it % STAGES;
                mbar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1);
                mbar_arrive_expect_tx(full + 8 * s, STAGE_BYTES);
                const unsigned a_tile = tiles + s * STAGE_BYTES;
                const int x = kb * BK;  // in two-byte words: FP8 column 128 kb
                tma_load_2d(a_tile, &map_a, x, w.m0, full + 8 * s);
                tma_load_2d(a_tile + A_BYTES, &map_b, x, w.n0, full + 8 * s);
            }
        }
        return;
    }

    // ---- the consumers ----
    setmaxnreg_inc<CONSUMER_REGS>();
    const int c = warpgroup - 1;
    const int lane128 = tid % 128;
    const int warp = lane128 / 32;
    const int g = (lane128 % 32) / 4;
    const int t = lane128 % 4;
    const bool paired =
        ldc % 2 == 0 && reinterpret_cast<unsigned long long>(C) % (2 * sizeof(OutT)) == 0;
    const float alpha = __fmul_rn(scale_a[0], scale_b[0]);
    float acc[HALVES][64];
    int it = 0;
    for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
        const Work w = work_unit(u, tiles_m, tiles_n, BN, 1, k_blocks, k_blocks);
#pragma unroll
        for (int h = 0; h < HALVES; ++h) {
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[h][i] = 0.0f;
        }
        int previous = -1;  // the stage whose wgmma may still run
        for (int kb = w.kb0; kb < w.kb1; ++kb, ++it) {
            const int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = tiles + s * STAGE_BYTES;
            const unsigned b_tile = a_tile + A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < FP8_K_BLOCK / FP8_K_SLICE; ++kk) {
#pragma unroll
                for (int h = 0; h < HALVES; ++h) {
                    wgmma_fp8_m64n128k32<A_FMT, B_FMT>(acc[h], desc_a<false>(a_tile, c, kk),
                                                       desc_b<true>(b_tile, h, kk), 1);
                }
            }
            wgmma_commit();
            wgmma_wait<1>();  // the previous block's wgmma are done: its stage is free
            if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);
            previous = s;
        }
        wgmma_wait<0>();
        if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);

        // Epilogue: register i = 4j + 2h2 + e of half h is row 16 warp + g + 8 h2 and column
        // 128 h + 8 j + 2 t + e of this consumer's 64 rows (gemm_sm90.cu's fragment).
        const int row0 = w.m0 + 64 * c + 16 * warp + g;
        const bool interior = paired && w.m0 + BM <= M && w.n0 + BN <= N;
#pragma unroll
        for (int h = 0; h < HALVES; ++h) {
#pragma unroll
            for (int p = 0; p < 32; ++p) {
                const int row = row0 + 8 * (p % 2);
                const int col = w.n0 + WG_N * h + 8 * (p / 2) + 2 * t;
                float v0 = __fmul_rn(acc[h][2 * p], alpha);
                float v1 = __fmul_rn(acc[h][2 * p + 1], alpha);
                if (bias != nullptr) {  // (an edge tile's columns past N read no bias)
                    if (col < N) v0 = with_bias(v0, C, bias + col);
                    if (col + 1 < N) v1 = with_bias(v1, C, bias + col + 1);
                }
                OutT* out = C + static_cast<long long>(row) * ldc + col;
                if (interior) {
                    store_fp8_pair(out, v0, v1);
                } else if (row < M) {
                    if (col < N) store_fp8_out(out, v0);
                    if (col + 1 < N) store_fp8_out(out + 1, v1);
                }
            }
        }
    }
}

// Explicit instantiations, so `nvcc -c` builds (and CI spill-checks) what
// backend/fp8_gemm.py registers. NVRTC instantiates only the name expressions.
#ifndef __CUDACC_RTC__
#define GEMM_FP8_INSTANTIATE(OUT, AF, BF, BN_)                                               \
    template __global__ void gemm_fp8_sm90<OUT, AF, BF, BN_>(                                \
        const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, OUT*,          \
        const OUT*, const float*, const float*, int, int, int, int);
#define GEMM_FP8_FORMATS(OUT, BN_)        \
    GEMM_FP8_INSTANTIATE(OUT, 0, 0, BN_)  \
    GEMM_FP8_INSTANTIATE(OUT, 0, 1, BN_)  \
    GEMM_FP8_INSTANTIATE(OUT, 1, 0, BN_)
GEMM_FP8_FORMATS(float, 128)
GEMM_FP8_FORMATS(float, 256)
GEMM_FP8_FORMATS(__half, 128)
GEMM_FP8_FORMATS(__half, 256)
GEMM_FP8_FORMATS(__nv_bfloat16, 128)
GEMM_FP8_FORMATS(__nv_bfloat16, 256)
#undef GEMM_FP8_FORMATS
#undef GEMM_FP8_INSTANTIATE
#endif  // __CUDACC_RTC__
