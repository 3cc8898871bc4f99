// gemm_sm90.cu: the Hopper GEMM (wgmma fed by TMA), same contract as gemm_fp16.cu.
//
// WHAT IT COMPUTES (exactly gemm_fp16.cu's specification; backend/gemm.py is the twin)
//
//     C = epilogue(alpha * op(A) @ op(B))        op(X) = X or X^T, chosen per operand
//     epilogue(v) = relu?( OutT(v + beta * C_in) + bias[n] ),  float32, then rounded to OutT
//   (with a bias the product is rounded to OutT first, as a matmul then an add would give:
//   Paddle's F.linear is those two ops; without one, a single rounding; the flags
//   EPILOGUE_PRODUCT_F16 / _BF16 round it to the 16-bit type instead, with or without a
//   bias, for a float32 result: a 16-bit matmul, then an add or a cast that widens it)
//
//   A and B are 16-bit floats (In = __half; __nv_bfloat16 is the same code with another
//   instruction), row-major with leading dimensions lda / ldb; layouts NN, NT and TN.
//   Products are exact in float32, sums are float32.
//
// WHY A SECOND GEMM
//
//   gemm_fp16.cu issues mma.sync: each warp loads fragments into registers (ldmatrix) and
//   multiplies 16 x 8 x 16 at a time. On Hopper that tops out near a third of the tensor
//   cores' peak (measured: 191-291 TFLOP/s against cuBLAS's 656-758 on an H100). Hopper's
//   own instruction, wgmma.mma_async, lets a warpgroup (4 warps, 128 threads) multiply a
//   64 x 128 x 16 block whose operands stay in shared memory: no ldmatrix, no operand
//   registers, and it runs asynchronously while the warps do other work. Its operands are
//   described by 64-bit "matrix descriptors" (address, strides, swizzle), and they arrive
//   through TMA, the Tensor Memory Accelerator: one thread asks for a whole 2-D box of a
//   matrix (cp.async.bulk.tensor) and the copy engine writes it into shared memory,
//   swizzled, zero-filling whatever lies outside the matrix, and counts the bytes on an
//   mbarrier. No thread computes an address per element.
//
// THE PIPELINE (one CTA = 3 warpgroups = 384 threads, persistent over output tiles)
//
//     warpgroup 0: the producer. One thread loops over this CTA's work; per K block it
//       waits until the stage is empty, announces the bytes to the stage's "full" barrier
//       and issues the TMA copies of the A and B boxes. It gives its registers away
//       (setmaxnreg.dec 40): it needs almost none.
//     warpgroups 1, 2: the consumers (setmaxnreg.inc 232). Consumer c owns rows
//       64c .. 64c+63 of the 128-row tile. Per K block: wait for "full", issue 4 (or 8)
//       wgmma over the stage (K = 64 = 4 x 16), commit, then wait until the PREVIOUS block's
//       wgmma have finished and give that stage back ("empty"). At the end of a tile, the
//       epilogue goes straight from the accumulators to global memory, while the producer is
//       already loading the next tile's first stages.
//
//          stage s:  [ A box 128 x 64 | B box(es) BN x 64 ]  full[s] mbarrier  empty[s] mbarrier
//
//          producer   wait empty[s] --> expect_tx(full[s]) --> TMA A, TMA B --------------+
//                          ^                                                              |
//                          |  arrive (one per consumer warpgroup)         bytes land, full[s] flips
//                          |                                                              v
//          consumers  wgmma done <-- wgmma.wait_group 1 <-- commit <-- wgmma x4 <-- wait full[s]
//
//   Each barrier completes one phase per use; a stage's n-th use waits for parity n & 1
//   (the producer waits for the opposite parity on "empty", which a fresh barrier already
//   satisfies: every stage starts empty).
//
//   PING-PONG (PINGPONG = true, 128 x 128 tiles): the schedule above is "cooperative", both
//   consumers on one tile. Ping-pong gives consumer c every other tile of the CTA (units
//   with index = c mod 2), whole: two 64-row wgmma per k16 slice, 128 accumulators. The
//   main loops take turns through two more mbarriers ("turn"): a consumer starts a tile
//   once the other has waited on every stage of its previous one. So one consumer's
//   epilogue overlaps the other's wgmma, and no consumer ever waits on a barrier two phases
//   ahead of its last completed one (parity could not tell them apart). Each stage then has
//   one reader, so "empty" counts one arrival.
//
// SHARED-MEMORY LAYOUT AND THE 128-BYTE SWIZZLE
//
//   Every box is 64 elements (128 bytes) wide in its contiguous dimension. TMA stores row r
//   of a box at r * 128 bytes with its eight 16-byte chunks permuted, chunk c at c ^ (r % 8)
//   (address bits 4-6 XOR bits 7-9, so boxes start on 1024-byte boundaries). wgmma's
//   descriptors name the same swizzle, and the hardware undoes it on the way in:
//     K-major operand (A in NN/NT, B in NT: rows of 64 k):  row r, element k at
//         r * 128 + 2k; 8-row groups are SBO = 1024 bytes apart; the k16 slice kk starts
//         32 * kk bytes into the row (inside the swizzle atom, which the hardware allows).
//     MN-major operand (A in TN, B in NN: rows of 64 m or n, one row per k): element
//         (x, k) at (x / 64) * LBO + k * 128 + 2 (x % 64); 64-wide blocks are LBO = 8192
//         bytes apart (one box), 8-row k groups SBO = 1024; slice kk starts at kk * 2048.
//   The instruction's "transpose" immediates tell wgmma which of the two it is reading.
//
// ACCUMULATOR FRAGMENT (wgmma m64n128, float32, like mma.sync's C fragment per 8 columns)
//   thread = 128c' + 32w + 4g + t of the warpgroup; register i = 4j + 2h + e holds
//   row 16w + g + 8h, column 8j + 2t + e of the warpgroup's 64 x 128 block.
//
// WORK: units = tiles x splits. Unit u is split u % splits of tile u / splits; tiles are
//   numbered in groups of GROUP_M tile rows (L2 reuse, as in gemm_fp16.cu). With splits > 1
//   a unit covers a range of K blocks and stores its raw float32 sums into `partial`
//   ([splits][M][N]); then each warp counts its split done on `counts` (one entry per tile,
//   piece and warp: the rows and columns of its fragment), and the warp whose split counts
//   last, which sees every other split's sums, adds the splits in order (0, 1, ...) and
//   applies the epilogue: the one rounding stays one rounding, the sums' order is fixed
//   (the same bits on every run), and no second launch reduces them. It sets its count back
//   to 0, as the launcher hands it (a kept, zeroed array).
//
// LAUNCH (backend/gemm_sm90.py): grid = (min(units, SMs), 1, 1), block = (384, 1, 1),
//   args map_a, map_b, C, bias, partial, counts (unsigned, tiles x 2 x 4 zeros; with
//   splits > 1), M, N, K, ldc, alpha, beta, flags, splits;
//   dynamic shared memory = smem_bytes(BN) (opt-in above 48 KB). Needs sm_90a.
//   The tensor maps are made on the host by cuTensorMapEncodeTiled (driver API) and passed
//   by value as __grid_constant__ parameters.
//
// HOST EMULATION: tests/gemm_sm90_emulator.cpp replaces the hardware layer below with C++
//   models (TMA with its swizzle, mbarrier phases and transaction counts, wgmma reading
//   shared memory through the descriptors, asynchronously until wait_group) and runs the
//   384 threads as fibers (tests/test_gemm_sm90.py).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_sm90.cu uses wgmma and setmaxnreg: compile it for sm_90a (-arch=sm_90a)"
#endif

constexpr int BM = 128;             // tile rows: two consumer warpgroups of 64
constexpr int BK = 64;              // K per stage: one 128-byte swizzle row of 16-bit values
constexpr int WG_N = 128;           // columns per wgmma instruction (m64n128k16)
constexpr int CONSUMERS = 2;        // consumer warpgroups
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int BOX_BYTES = 64 * BK * 2;  // 8 KB: a 64-row box of one stage
constexpr int SMEM_TILES = 192 * 1024;  // shared memory for the stages
constexpr int GROUP_M = 8;
constexpr int PRODUCER_REGS = 40;   // setmaxnreg: 128 x 40 + 256 x 232 <= 65536
constexpr int CONSUMER_REGS = 232;

constexpr int EPILOGUE_BIAS = 1;
constexpr int EPILOGUE_RELU = 2;
constexpr int EPILOGUE_PRODUCT_F16 = 4;   // gemm_fp16.cu's flags, same meanings
constexpr int EPILOGUE_PRODUCT_BF16 = 8;

__host__ __device__ constexpr int stage_bytes(int bn) { return (BM + bn) * BK * 2; }
__host__ __device__ constexpr int stages_for(int bn) { return SMEM_TILES / stage_bytes(bn); }
// 1 KB of slack to align the tiles to 1024 bytes, then the tiles, then 2 barriers per stage
// and the ping-pong schedule's 2 "your turn" barriers.
__host__ __device__ constexpr int smem_bytes(int bn) {
    return 1024 + stages_for(bn) * stage_bytes(bn) + 2 * 8 * stages_for(bn) + 2 * 8;
}

// A CUtensorMap: 128 opaque bytes made by cuTensorMapEncodeTiled on the host.
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

// ---------------------------------------------------------------------------------------
// The hardware layer (tests/gemm_sm90_emulator.cpp defines MINITORCH_GEMM_HOST_EMULATION
// and supplies C++ models of these).
// ---------------------------------------------------------------------------------------
#ifndef MINITORCH_GEMM_HOST_EMULATION

__device__ __forceinline__ unsigned char* dynamic_smem() {
    extern __shared__ __align__(1024) unsigned char gemm_sm90_smem[];
    return gemm_sm90_smem;
}

__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

// Make the initialised barriers visible to the other threads and to the TMA unit.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive once and announce `bytes` that TMA copies will complete on this barrier.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Wait until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

// Copy the box at (x = contiguous coordinate, y = row) of `map` into shared memory `dst`,
// completing its bytes on barrier `bar`. Outside the matrix the box is filled with zeros.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void tma_prefetch(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map))
                 : "memory");
}

// Order this warpgroup's register accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Wait until at most N committed wgmma groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

#define WGMMA_D8(i)                                                                        \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),            \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_ASM(TYPES)                                                                   \
    asm volatile(                                                                          \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                       \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPES " "                           \
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "          \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
        "%64, %65, p, 1, 1, %67, %68;\n}\n"                                                \
        : WGMMA_D8(0), WGMMA_D8(8), WGMMA_D8(16), WGMMA_D8(24), WGMMA_D8(32), WGMMA_D8(40), \
          WGMMA_D8(48), WGMMA_D8(56)                                                        \
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B))

template <typename In>
struct Wgmma;  // the element type's instruction: f16 or bf16 inputs
template <>
struct Wgmma<__half> {
    static constexpr bool bf16 = false;
};
template <>
struct Wgmma<__nv_bfloat16> {
    static constexpr bool bf16 = true;
};

// d (64 x 128 block, float32) = A (64 x 16) @ B (16 x 128) + (accumulate ? d : 0), both
// operands in shared memory as described by desc_a / desc_b. TRANS_A / TRANS_B say the
// operand is MN-major (1) rather than K-major (0). The element type picks the instruction.
template <typename In, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                 unsigned long long desc_b, int accumulate) {
    if constexpr (Wgmma<In>::bf16) {
        WGMMA_ASM("bf16.bf16");
    } else {
        WGMMA_ASM("f16.f16");
    }
}
#undef WGMMA_ASM
#undef WGMMA_D8

#endif  // MINITORCH_GEMM_HOST_EMULATION

// ---------------------------------------------------------------------------------------
// Descriptors, work units, the epilogue.
// ---------------------------------------------------------------------------------------

// A wgmma matrix descriptor for a 128-byte-swizzled operand at shared address `addr`:
// bits 0-13 address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
// 62-63 the swizzle mode (1 = 128 bytes). The base-offset bits stay 0: boxes are
// 1024-byte aligned.
__host__ __device__ __forceinline__ unsigned long long make_desc(unsigned addr, unsigned lbo,
                                                                 unsigned sbo) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16 |
           static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

// Descriptor of consumer c's A operand (64 rows) for k16 slice kk of the stage at a_tile.
template <bool TRANS_A>
__host__ __device__ __forceinline__ unsigned long long desc_a(unsigned a_tile, int c, int kk) {
    if (TRANS_A)  // MN-major: box c holds m 64c.. as 64 rows of k, 128 bytes each
        return make_desc(a_tile + c * BOX_BYTES + kk * 16 * 128, BOX_BYTES, 1024);
    return make_desc(a_tile + c * 64 * 128 + kk * 32, 16, 1024);  // K-major, LBO unused
}

// Descriptor of the B operand's 128 columns starting at column 128 * half, k16 slice kk.
template <bool TRANS_B>
__host__ __device__ __forceinline__ unsigned long long desc_b(unsigned b_tile, int half,
                                                              int kk) {
    if (TRANS_B)  // K-major: rows of n, 64 k each
        return make_desc(b_tile + half * WG_N * 128 + kk * 32, 16, 1024);
    // MN-major: boxes of 64 n, each 64 rows of k
    return make_desc(b_tile + half * 2 * BOX_BYTES + kk * 16 * 128, BOX_BYTES, 1024);
}

struct Work {
    int m0, n0;      // the tile's first row and column
    int kb0, kb1;    // its K blocks [kb0, kb1)
    int split;       // which split of the tile
};

__host__ __device__ __forceinline__ Work work_unit(int u, int tiles_m, int tiles_n, int bn,
                                                   int splits, int per_split, int k_blocks) {
    Work w;
    w.split = u % splits;
    const int tile = u / splits;
    const int per_group = GROUP_M * tiles_n;
    const int first_m = tile / per_group * GROUP_M;
    const int rows = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
    const int in_group = tile % per_group;
    w.m0 = (first_m + in_group % rows) * BM;
    w.n0 = in_group / rows * bn;
    w.kb0 = w.split * per_split;
    w.kb1 = w.kb0 + per_split < k_blocks ? w.kb0 + per_split : k_blocks;
    return w;
}

template <typename T>
__device__ __forceinline__ float load_out(const T* p) {
    if constexpr (sizeof(T) == 4) return *p;
    else return __half2float(*p);
}
template <typename T>
__device__ __forceinline__ void store_out(T* p, float v) {
    if constexpr (sizeof(T) == 4) *p = v;
    else *p = __float2half_rn(v);
}

// v rounded to OutT and back: the product as a GEMM that stored it would hand an add.
__device__ __forceinline__ float round_to(float v, const float*) { return v; }
__device__ __forceinline__ float round_to(float v, const __half*) {
    return __half2float(__float2half_rn(v));
}
__device__ __forceinline__ float round_to(float v, const __nv_bfloat16*) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// Split-K: after its lanes have stored their partial sums, whether this warp's split is the
// last of its tile piece to be stored (then every other split's sums are visible to it, and
// its count is 0 again). A fence, a warp barrier and one atomic per warp: the pattern of
// CUDA's threadFenceReduction sample, per warp.
__device__ __forceinline__ bool last_split(unsigned* count, int splits) {
    __threadfence();  // this lane's partial sums are visible device-wide before the count
    __syncwarp();
    unsigned last = 0;
    if (threadIdx.x % 32 == 0) {
        last = atomicAdd(count, 1u) == static_cast<unsigned>(splits - 1);
        if (last) *count = 0u;  // every split has counted: nothing else touches it now
    }
    last = __shfl_sync(0xffffffffu, last, 0);
    if (last) __threadfence();  // the other splits' sums are read after their counts
    return last != 0;
}

// gemm_fp16.cu's epilogue, step by step: no FMA contraction, NaN kept by the ReLU.
template <typename OutT>
__device__ __forceinline__ float epilogue(float acc, float c_in, float alpha, float beta,
                                          float bias, int flags) {
    float v = __fmul_rn(alpha, acc);
    if (beta != 0.0f) v = __fadd_rn(v, __fmul_rn(beta, c_in));
    // the product as stored: in the 16-bit type a matmul stored before a float32 add or
    // cast (EPILOGUE_PRODUCT_*, with or without a bias), else in OutT before a bias's add
    if (flags & EPILOGUE_PRODUCT_F16) {
        v = round_to(v, static_cast<const __half*>(nullptr));
    } else if (flags & EPILOGUE_PRODUCT_BF16) {
        v = round_to(v, static_cast<const __nv_bfloat16*>(nullptr));
    } else if (flags & EPILOGUE_BIAS) {
        v = round_to(v, static_cast<const OutT*>(nullptr));
    }
    if (flags & EPILOGUE_BIAS) v = __fadd_rn(v, bias);
    if (flags & EPILOGUE_RELU) v = v < 0.0f ? 0.0f : v;
    return v;
}

template <typename OutT>
__device__ __forceinline__ void finish(OutT* C, const OutT* bias, int row, int col, int ldc,
                                       float acc, float alpha, float beta, int flags) {
    OutT* out = C + static_cast<long long>(row) * ldc + col;
    const float c_in = beta != 0.0f ? load_out(out) : 0.0f;
    const float b = (flags & EPILOGUE_BIAS) ? load_out(bias + col) : 0.0f;
    store_out(out, epilogue<OutT>(acc, c_in, alpha, beta, b, flags));
}

// Two adjacent columns of one row as a single 4-byte (half) or 8-byte (float) store: the
// interior tiles' epilogue writes half as many, twice as wide, as finish() would.
template <typename T>
struct Pair;
template <>
struct Pair<__half> {
    using type = __half2;
    static __device__ __forceinline__ type make(float a, float b) {
        return __halves2half2(__float2half_rn(a), __float2half_rn(b));
    }
};
template <>
struct Pair<float> {
    using type = float2;
    static __device__ __forceinline__ type make(float a, float b) { return make_float2(a, b); }
};

// ---------------------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------------------

template <bool TRANS_A, bool TRANS_B, typename OutT, typename In, int BN, bool PINGPONG>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
              OutT* C, const OutT* bias, float* partial, unsigned* counts, int M, int N,
              int K, int ldc, float alpha, float beta, int flags, int splits) {
    constexpr int STAGES = stages_for(BN);
    constexpr int STAGE_BYTES = stage_bytes(BN);
    constexpr int A_BYTES = BM * BK * 2;
    constexpr int HALVES = BN / WG_N;  // wgmma per k16 slice and 64-row block
    // Cooperative: the two consumers share each tile, 64 rows each. Ping-pong: each takes
    // every other tile whole (both 64-row blocks), so one's epilogue overlaps the other's
    // main loop; its 128 x 128 accumulators fill 128 registers, so only with BN = 128.
    constexpr int ROW_BLOCKS = PINGPONG ? 2 : 1;
    constexpr int USERS = PINGPONG ? 1 : CONSUMERS;  // consumers reading each stage
    static_assert(BN % WG_N == 0 && STAGES >= 2, "BN is 128 or 256");
    static_assert(!PINGPONG || BN == WG_N, "ping-pong tiles are 128 x 128");

    unsigned char* raw = dynamic_smem();
    const unsigned base = smem_address(raw);
    const unsigned tiles = (base + 1023u) & ~1023u;  // 128-byte swizzle: 1024-aligned boxes
    const unsigned full = tiles + STAGES * STAGE_BYTES;
    const unsigned empty = full + 8 * STAGES;
    const unsigned turn = empty + 8 * STAGES;  // ping-pong: turn + 8c is consumer c's

    const int tid = static_cast<int>(threadIdx.x);
    const int warpgroup = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);             // the producer's arrive (+ TMA bytes)
            mbar_init(empty + 8 * s, USERS);        // one arrive per consumer that reads it
        }
        mbar_init(turn, 1);
        mbar_init(turn + 8, 1);
        mbar_init_fence();
    }
    __syncthreads();

    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int k_blocks = (K + BK - 1) / BK;
    const int per_split = (k_blocks + splits - 1) / splits;
    const int units = tiles_m * tiles_n * splits;

    if (warpgroup == 0) {  // ---- the producer ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (tid != 0) return;
        tma_prefetch(&map_a);
        tma_prefetch(&map_b);
        int it = 0;  // K blocks loaded so far by this CTA: stage it % STAGES, use it / STAGES
        for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
            const Work w = work_unit(u, tiles_m, tiles_n, BN, splits, per_split, k_blocks);
            for (int kb = w.kb0; kb < w.kb1; ++kb, ++it) {
                const int s = it % STAGES;
                mbar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1);
                mbar_arrive_expect_tx(full + 8 * s, STAGE_BYTES);
                const unsigned a_tile = tiles + s * STAGE_BYTES;
                const unsigned b_tile = a_tile + A_BYTES;
                const int k0 = kb * BK;
                if (TRANS_A) {  // A^T is K x M: two boxes of 64 m x 64 k
                    tma_load_2d(a_tile, &map_a, w.m0, k0, full + 8 * s);
                    tma_load_2d(a_tile + BOX_BYTES, &map_a, w.m0 + 64, k0, full + 8 * s);
                } else {  // A is M x K: one box of 128 rows x 64 k
                    tma_load_2d(a_tile, &map_a, k0, w.m0, full + 8 * s);
                }
                if (TRANS_B) {  // B^T is N x K: one box of BN rows x 64 k
                    tma_load_2d(b_tile, &map_b, k0, w.n0, full + 8 * s);
                } else {  // B is K x N: BN / 64 boxes of 64 n x 64 k
                    for (int j = 0; j < BN / 64; ++j)
                        tma_load_2d(b_tile + j * BOX_BYTES, &map_b, w.n0 + 64 * j, k0,
                                    full + 8 * s);
                }
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
    // Pairs of columns are aligned when C's rows are an even number of elements apart and C
    // itself is aligned to a pair (CuPy's allocations are; a view may not be).
    const bool paired =
        ldc % 2 == 0 && reinterpret_cast<unsigned long long>(C) % (2 * sizeof(OutT)) == 0;
    float acc[ROW_BLOCKS][HALVES][64];
    int it = 0;     // K blocks this CTA has consumed (its own and, in ping-pong, the other's)
    int mine = 0;   // units of this CTA so far: in ping-pong consumer c takes those = c mod 2
    for (int u = static_cast<int>(blockIdx.x); u < units;
         u += static_cast<int>(gridDim.x), ++mine) {
        const Work w = work_unit(u, tiles_m, tiles_n, BN, splits, per_split, k_blocks);
        if (PINGPONG && mine % CONSUMERS != c) {
            it += w.kb1 - w.kb0;  // the other consumer's stages: skip them in the ring
            continue;
        }
        // Ping-pong: main loops take turns. A consumer waits for its turn (the other one has
        // waited on every "full" barrier of the tile before) so that it never waits on a
        // barrier two phases ahead, where the parity test could not tell the phases apart.
        // Its j-th tile waits for phase j of its turn barrier; the first tile needs no turn.
        const int round = mine / CONSUMERS;
        if (PINGPONG && (c == 1 || round > 0)) mbar_wait(turn + 8 * c, (round - 1 + c) & 1);
#pragma unroll
        for (int r = 0; r < ROW_BLOCKS; ++r) {
#pragma unroll
            for (int h = 0; h < HALVES; ++h) {
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[r][h][i] = 0.0f;
            }
        }
        int previous = -1;  // the stage whose wgmma may still run
        for (int kb = w.kb0; kb < w.kb1; ++kb, ++it) {
            const int s = it % STAGES;
            mbar_wait(full + 8 * s, (it / STAGES) & 1);
            const unsigned a_tile = tiles + s * STAGE_BYTES;
            const unsigned b_tile = a_tile + A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
                for (int r = 0; r < ROW_BLOCKS; ++r) {
#pragma unroll
                    for (int h = 0; h < HALVES; ++h) {
                        wgmma_m64n128k16<In, TRANS_A ? 1 : 0, TRANS_B ? 0 : 1>(
                            acc[r][h], desc_a<TRANS_A>(a_tile, PINGPONG ? r : c, kk),
                            desc_b<TRANS_B>(b_tile, h, kk), 1);
                    }
                }
            }
            wgmma_commit();
            wgmma_wait<1>();  // the previous block's wgmma are done: its stage is free
            if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);
            previous = s;
        }
        // Every "full" wait of this tile is behind us (each wgmma is warpgroup-wide): the
        // other consumer's turn.
        if (PINGPONG && lane128 == 0) mbar_arrive(turn + 8 * (1 - c));
        wgmma_wait<0>();
        if (previous >= 0 && lane128 == 0) mbar_arrive(empty + 8 * previous);

        // Epilogue: register i = 4j + 2h2 + e of half h is row 16 warp + g + 8 h2 and
        // column 128 h + 8 j + 2 t + e of this consumer's 64 rows. Registers 2p and 2p + 1
        // are neighbours in a row: an interior tile with nothing to read back (no split,
        // beta = 0) stores them as one pair, the same values rounded the same way.
        const int row0 = w.m0 + 16 * warp + g;  // + 64 * (this 64-row block) + 8 h2
        // the row and column of register i of row block r, half h
        auto row_of = [&](int r, int i) {
            return row0 + 64 * (PINGPONG ? r : c) + 8 * ((i / 2) % 2);
        };
        auto col_of = [&](int h, int i) { return w.n0 + WG_N * h + 8 * (i / 4) + 2 * t + i % 2; };
        if (paired && splits == 1 && beta == 0.0f && w.m0 + BM <= M && w.n0 + BN <= N) {
#pragma unroll
            for (int r = 0; r < ROW_BLOCKS; ++r) {
#pragma unroll
                for (int h = 0; h < HALVES; ++h) {
#pragma unroll
                    for (int p = 0; p < 32; ++p) {
                        const int row = row0 + 64 * (PINGPONG ? r : c) + 8 * (p % 2);
                        const int col = w.n0 + WG_N * h + 8 * (p / 2) + 2 * t;
                        float b0 = 0.0f, b1 = 0.0f;
                        if (flags & EPILOGUE_BIAS) {
                            b0 = load_out(bias + col);
                            b1 = load_out(bias + col + 1);
                        }
                        const float* v = &acc[r][h][2 * p];
                        const float v0 = epilogue<OutT>(v[0], 0.0f, alpha, 0.0f, b0, flags);
                        const float v1 = epilogue<OutT>(v[1], 0.0f, alpha, 0.0f, b1, flags);
                        OutT* out = C + static_cast<long long>(row) * ldc + col;
                        *reinterpret_cast<typename Pair<OutT>::type*>(out) =
                            Pair<OutT>::make(v0, v1);
                    }
                }
            }
            continue;
        }
        // Split-K: the piece's partial sums, then the last split's warp adds them up.
        if (splits > 1) {
            const long long mn = static_cast<long long>(M) * N;
#pragma unroll
            for (int r = 0; r < ROW_BLOCKS; ++r) {
#pragma unroll
                for (int h = 0; h < HALVES; ++h) {
#pragma unroll
                    for (int i = 0; i < 64; ++i) {
                        const int row = row_of(r, i), col = col_of(h, i);
                        if (row < M && col < N)
                            partial[w.split * mn + static_cast<long long>(row) * N + col] =
                                acc[r][h][i];
                    }
                }
            }
            // the piece: a ping-pong consumer takes the whole tile, a cooperative one its half
            const int tile = (w.m0 / BM) * tiles_n + w.n0 / BN;
            const int piece = (tile * CONSUMERS + (PINGPONG ? 0 : c)) * 4 + warp;
            if (!last_split(counts + piece, splits)) continue;
            // Every split's sums, this one's too, from the workspace (L2 reads: other SMs
            // wrote them), in split order: a plain loop, no accumulator register is read.
#pragma unroll 1
            for (int j = 0; j < ROW_BLOCKS * HALVES * 64; ++j) {
                const int r = j / (HALVES * 64), h = j / 64 % HALVES, i = j % 64;
                const int row = row_of(r, i), col = col_of(h, i);
                if (row >= M || col >= N) continue;
                const float* at = partial + static_cast<long long>(row) * N + col;
                float sum = __ldcg(at);
                for (int s = 1; s < splits; ++s) sum = __fadd_rn(sum, __ldcg(at + s * mn));
                finish(C, bias, row, col, ldc, sum, alpha, beta, flags);
            }
            continue;
        }
#pragma unroll
        for (int r = 0; r < ROW_BLOCKS; ++r) {
#pragma unroll
            for (int h = 0; h < HALVES; ++h) {
#pragma unroll
                for (int i = 0; i < 64; ++i) {
                    const int row = row_of(r, i), col = col_of(h, i);
                    if (row >= M || col >= N) continue;
                    finish(C, bias, row, col, ldc, acc[r][h][i], alpha, beta, flags);
                }
            }
        }
    }
}

// Explicit instantiations, so `nvcc -c` builds what backend/gemm_sm90.py registers and
// compile-checks the bf16 instruction too. NVRTC instantiates only the name expressions.
// (A file that includes this one for its pipeline defines GEMM_SM90_INCLUDED first: these
// are then compiled once, here, not again with each file that builds on them.)
#if !defined(__CUDACC_RTC__) && !defined(GEMM_SM90_INCLUDED)
#define GEMM_SM90_INSTANTIATE(TA, TB, OUT, IN, BN_, PP)                                     \
    template __global__ void gemm_sm90<TA, TB, OUT, IN, BN_, PP>(                           \
        const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, OUT*,         \
        const OUT*, float*, unsigned*, int, int, int, int, float, float, int, int);
#define GEMM_SM90_LAYOUTS(OUT, IN, BN_, PP)            \
    GEMM_SM90_INSTANTIATE(false, false, OUT, IN, BN_, PP) \
    GEMM_SM90_INSTANTIATE(false, true, OUT, IN, BN_, PP)  \
    GEMM_SM90_INSTANTIATE(true, false, OUT, IN, BN_, PP)
GEMM_SM90_LAYOUTS(__half, __half, 128, false)
GEMM_SM90_LAYOUTS(__half, __half, 256, false)
GEMM_SM90_LAYOUTS(__half, __half, 128, true)
GEMM_SM90_LAYOUTS(float, __half, 128, false)
GEMM_SM90_LAYOUTS(float, __half, 256, false)
GEMM_SM90_LAYOUTS(float, __half, 128, true)
GEMM_SM90_LAYOUTS(__half, __nv_bfloat16, 128, false)
GEMM_SM90_LAYOUTS(float, __nv_bfloat16, 128, false)
#undef GEMM_SM90_LAYOUTS
#undef GEMM_SM90_INSTANTIATE
#endif  // __CUDACC_RTC__
