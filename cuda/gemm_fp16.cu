// gemm_fp16.cu: the tensor-core GEMM behind matmul and Linear (forward and backward).
//
// WHAT IT COMPUTES
//
//     C = epilogue(alpha * op(A) @ op(B))        op(X) = X or X^T, chosen per operand
//     epilogue(v) = relu?( OutT(v + beta * C_in) + bias[n] )
//
//   A and B are float16, row-major in memory: A is M x K (or K x M when TRANS_A), B is K x N
//   (or N x K when TRANS_B), with leading dimensions lda / ldb (elements between rows).
//   Products are exact in float32 (a float16 times a float16 always fits), sums are float32,
//   and the epilogue runs in float32 in exactly this order, each step rounded to nearest:
//       v = alpha * acc;  v = v + beta * C_in (only when beta != 0: C is not read otherwise);
//       with flag EPILOGUE_BIAS: v = OutT(v) (rounded to the output type), v = v + bias[n];
//         with EPILOGUE_PRODUCT_F16 (or _BF16) as well, v is rounded to float16 (bfloat16)
//         there instead: a 16-bit matmul whose stored result an add widens to a float32
//         bias (AMP's O1 Linear, OutT float), one launch instead of matmul, cast and add;
//       with EPILOGUE_PRODUCT_F16 (_BF16) and no bias, v is rounded to float16 (bfloat16)
//         all the same: a 16-bit matmul and a cast to float32 (OutT float) in one launch;
//       v = v < 0 ? 0 : v (flag EPILOGUE_RELU; NaN stays);
//   then a rounding to OutT (float16, bfloat16 or float32) on the store. C is M x N with ldc, updated
//   in place; bias has N entries of type OutT. Any M, N, K >= 0 works, and any lda/ldb/ldc.
//   NOTE: the product is rounded to OutT before the bias is added, as an unfused GEMM then
//   add would (Paddle's F.linear is a matmul op then an add op): one launch, their result.
//
//   The three layouts a Linear layer needs, y = x @ W (W stored [in, out], Paddle's way):
//       forward   y  = x  @ W      gemm_f16<false, false, __half>   (NN)
//       dgrad     dx = dy @ W^T    gemm_f16<false, true,  __half>   (NT)
//       wgrad     dW = x^T @ dy    gemm_f16<true,  false, float or __half>   (TN)
//   No data is transposed in memory: the transposes are absorbed by how tiles are loaded
//   into shared memory and by ldmatrix's .trans variant (below).
//
//   bfloat16: gemm_bf16<TRANS_A, TRANS_B, OutT> (OutT = __nv_bfloat16 or float) is the same
//   kernel body with InT = __nv_bfloat16: the tiles, swizzle, cp.async and ldmatrix move
//   16-bit values whatever they mean, and only the tensor-core instruction differs
//   (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, the same fragment layout). A
//   product of two bfloat16 values (8 significant bits each) is exact in float32 too, so
//   the twin's float32 products, float32 sums and roundings to OutT hold unchanged.
//
// TILING (one block = 256 threads = 8 warps computes a 128 x 128 tile of C)
//
//                              B tile of one stage: 32 (k) x 128 (n)
//                           +-----------+-----------+-----------+-----------+
//                           |  n 0-31   |  n 32-63  |  n 64-95  |  n 96-127 |
//                           +-----------+-----------+-----------+-----------+
//     A tile of one stage   C tile: 128 x 128, each warp owns 64 x 32 of it
//     128 (m) x 32 (k)      +-----------+-----------+-----------+-----------+
//     +--------------+      |  warp 0   |  warp 1   |  warp 2   |  warp 3   |  m 0-63
//     |   m 0-63     |      +-----------+-----------+-----------+-----------+
//     |   m 64-127   |      |  warp 4   |  warp 5   |  warp 6   |  warp 7   |  m 64-127
//     +--------------+      +-----------+-----------+-----------+-----------+
//   The block walks K in steps of BK=32: each step is two k16 slices, and for each slice a warp
//   issues 4 (m) x 4 (n) = 16 mma.sync.m16n8k16 instructions on fragments it loaded with 6
//   ldmatrix.x4 (4 for A, 2 for B). Each thread holds 4 x 4 x 4 = 64 float32 accumulators.
//
// PIPELINE (cp.async, STAGES = 4 shared-memory buffers of 16 KB: one A tile + one B tile)
//
//   prologue:  issue tiles 0, 1, 2 -> stages 0, 1, 2 (one commit group each)
//   step kt:   wait until tile kt has landed (cp.async.wait_group STAGES-2), __syncthreads();
//              issue tile kt+3 into stage (kt+3) % 4, the one everybody finished at step kt-1;
//              compute on stage kt % 4 while up to three tiles are in flight.
//   One barrier per step does both jobs: it publishes tile kt and retires stage (kt-1) % 4.
//   A tile row that lies outside the matrix, or the ragged end of K, is zero-filled by
//   cp.async's src-size operand (`cp.async.cg.shared.global [dst], [src], 16, src_size`
//   copies src_size bytes and writes zeros for the rest), so the tails cost nothing extra
//   and the mma loop has no bounds checks. When lda or ldb is not a multiple of 8 (or the
//   pointer is not 16-byte aligned), rows do not start on 16-byte boundaries and the
//   operand is loaded element by element instead (slower, same result).
//
// FRAGMENTS OF mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (lane = 4 * g + t)
//
//   A (16 x 16, row):  a0 = A[g][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]
//                      a2 = A[g][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, col):   b0 = B[2t, 2t+1][g]    b1 = B[2t+8, 2t+9][g]
//   C (16 x 8, f32):   c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
//   (each aN / bN is a 32-bit register holding two float16 values)
//
//   ldmatrix.x4 loads four 8 x 8 matrices of 16-bit values; lanes 8q..8q+7 give the row
//   addresses of matrix q, and register q of lane 4g+t receives row g, columns 2t and 2t+1:
//   exactly a0..a3 when the four matrices are the quadrants of a 16 x 16 A block stored
//   K-contiguous. With .trans the matrix is read transposed (register q gets column g, rows
//   2t and 2t+1), which turns an M-contiguous A^T tile, or an N-contiguous B tile, into the
//   same fragments. So each operand tile is stored the way it lies in global memory:
//       A  (NN, NT): [128 m][32 k], k contiguous  -> ldmatrix
//       A^T (TN):    [32 k][128 m], m contiguous  -> ldmatrix.trans
//       B  (NN, TN): [32 k][128 n], n contiguous  -> ldmatrix.trans
//       B^T (NT):    [128 n][32 k], k contiguous  -> ldmatrix
//
// SWIZZLE (bank-conflict-free ldmatrix without padding)
//
//   ldmatrix reads eight 16-byte rows per matrix; they are conflict free when they cover all
//   32 banks, i.e. eight different 16-byte positions modulo 128 bytes. A [128][32] tile row is
//   64 bytes, so rows r and r+2 would collide; we store 16-byte chunk c of row r at chunk
//   c ^ ((r >> 1) & 3). A [32][128] tile row is 256 bytes (all rows start at bank 0); we store
//   chunk c at c ^ (r & 7). Writers (cp.async) and readers (ldmatrix) use the same function.
//
// BLOCK ORDER: blockIdx.x is mapped to tiles in groups of GROUP_M tile rows, column by column
//   inside a group, so blocks running together share B columns and A rows in L2.
//
// BATCHES: blockIdx.y picks one of gridDim.y products, each as above: entry z reads A and B
//   and writes C stride_a, stride_b and stride_c elements after entry 0 (a stride of 0 gives
//   every entry the same matrix, a broadcast operand); bias, alpha, beta and flags are the
//   same for all. Attention's scores and weighted sums ([batch, heads] products of
//   [seq, head_dim] matrices) are one launch instead of one per head and batch row.
//
// LAUNCH: grid = (ceil(M/128) * ceil(N/128), batches, 1) (batches <= 65535, gridDim.y's
//   limit), block = (256, 1, 1),
//   dynamic shared memory = STAGES * 16 KB = 64 KB (> 48 KB: the caller raises the kernel's
//   max_dynamic_shared_size_bytes first). Needs sm_80+ (cp.async, the m16n8k16 f16 mma).
//
// DTYPES: A, B float16 (gemm_bf16: bfloat16); C, C_in and bias OutT (the input type or
//   float32); alpha, beta float32;
//   M, N, K, lda, ldb, ldc, flags int32 (EPILOGUE_BIAS 1, EPILOGUE_RELU 2,
//   EPILOGUE_PRODUCT_F16 4, EPILOGUE_PRODUCT_BF16 8); stride_a, stride_b, stride_c int64.
//
// CALLER: minitorch_amp/backend/gemm.py (gemm(), which registers the six instantiations at
//   the bottom of this file). NUMPY TWIN: backend/gemm.py's gemm() on NumPy arrays, i.e.
//   backend/primitives.matmul's float32 accumulation followed by the epilogue above.
//   tests/test_gemm.py holds the two to the same specification.
//
// HOST EMULATION: tests/gemm_emulator.cpp compiles this file on a CPU with the "hardware
//   layer" below replaced by C++ models of the PTX instructions, and runs every block's 256
//   threads as cooperative fibers, so the index arithmetic is tested without a GPU
//   (tests/test_gemm_emulator.py).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef GEMM_STAGES
#define GEMM_STAGES 4  // backend/gemm.py passes -DGEMM_STAGES=<its STAGES>
#endif

constexpr int BM = 128;  // block tile rows (M)
constexpr int BN = 128;  // block tile columns (N)
constexpr int BK = 32;   // K per pipeline stage
constexpr int STAGES = GEMM_STAGES;
constexpr int THREADS = 256;
constexpr int WARPS_N = 4;                 // warps side by side along N ...
constexpr int WARPS_M = 2;                 // ... and stacked along M
constexpr int WM = BM / WARPS_M;           // 64: warp tile rows
constexpr int WN = BN / WARPS_N;           // 32: warp tile columns
constexpr int MI = WM / 16;                // 4 mma tiles along M per warp
constexpr int NI = WN / 8;                 // 4 mma tiles along N per warp
constexpr int GROUP_M = 8;                 // tile rows per L2 group of blocks
constexpr int TILE_BYTES = BM * BK * 2;    // 8 KB: one operand tile of one stage
constexpr int STAGE_BYTES = 2 * TILE_BYTES;
constexpr int CHUNKS_PER_TILE = TILE_BYTES / 16;  // 512 16-byte chunks ...
constexpr int CHUNKS_PER_THREAD = CHUNKS_PER_TILE / THREADS;  // ... 2 per thread

constexpr int EPILOGUE_BIAS = 1;  // flags bit: add bias[n]
constexpr int EPILOGUE_RELU = 2;  // flags bit: v < 0 ? 0 : v
constexpr int EPILOGUE_PRODUCT_F16 = 4;   // flags bit: the product is rounded to float16
constexpr int EPILOGUE_PRODUCT_BF16 = 8;  // (bfloat16) first, before any add (OutT float)

static_assert(BM == BN, "one loader serves both operands: their tiles have the same shape");
static_assert(WARPS_M * WARPS_N * 32 == THREADS, "8 warps");
static_assert(CHUNKS_PER_TILE % THREADS == 0, "every thread copies the same number of chunks");
static_assert(STAGES >= 2, "a pipeline needs at least two stages");

// ---------------------------------------------------------------------------------------
// The hardware layer: every PTX instruction the kernel uses, one wrapper each.
// (tests/gemm_emulator.cpp defines MINITORCH_GEMM_HOST_EMULATION and supplies C++ models.)
// ---------------------------------------------------------------------------------------
#ifndef MINITORCH_GEMM_HOST_EMULATION

__device__ __forceinline__ unsigned char* dynamic_smem() {
    extern __shared__ __align__(128) unsigned char gemm_smem[];
    return gemm_smem;
}

// 32-bit shared-state-space address of a generic pointer into shared memory.
__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copy src_bytes (0..16) from global src to shared dst and zero the rest of the 16 bytes.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void store_shared_16(unsigned dst, unsigned w0, unsigned w1,
                                                unsigned w2, unsigned w3) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w0), "r"(w1),
                 "r"(w2), "r"(w3)
                 : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2,
                                            unsigned& r3, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// d += a @ b for one 16 x 8 x 16 tile (fragments as in the header comment).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The bfloat16 tensor-core instruction: the same fragments, bfloat16 pairs in the registers.
__device__ __forceinline__ void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif  // MINITORCH_GEMM_HOST_EMULATION

// The instruction for the input type: Mma<__half>::run or Mma<__nv_bfloat16>::run.
template <typename InT>
struct Mma;
template <>
struct Mma<__half> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
        mma_16816(d, a, b);
    }
};
template <>
struct Mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
        mma_16816_bf16(d, a, b);
    }
};

// ---------------------------------------------------------------------------------------
// Shared-memory tiles: layout, swizzle, and the global -> shared copy.
// ---------------------------------------------------------------------------------------

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile with CHUNKS chunks per row.
template <int CHUNKS>
__device__ __forceinline__ unsigned swizzled(int row, int chunk) {
    static_assert(CHUNKS == 4 || CHUNKS == 16, "tiles are [128][32] or [32][128] halves");
    const int x = CHUNKS == 4 ? (row >> 1) & 3 : row & 7;
    return static_cast<unsigned>((row * CHUNKS + (chunk ^ x)) * 16);
}

// Rows of the operand start on 16-byte boundaries: cp.async may copy 8 halves at a time.
template <typename InT>
__device__ __forceinline__ bool vectorizable(const InT* p, int ld) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0 && ld % 8 == 0;
}

__device__ __forceinline__ int clamp_0_8(int x) {
    return x < 0 ? 0 : (x > 8 ? 8 : x);
}

// Copy one operand tile of one stage. The operand is a row-major matrix `g` of
// `outer_extent` rows and `inner_extent` contiguous columns with leading dimension `ld`;
// the tile starts at row outer0, column inner0. K_MAJOR tiles ([128][32]) hold A or B^T
// (outer = m or n, inner = k); the others ([32][128]) hold A^T or B (outer = k, inner = m
// or n). Every thread copies two 16-byte chunks; outside the matrix they are zeros.
template <bool K_MAJOR, typename InT>
__device__ __forceinline__ void load_tile(unsigned tile, const InT* __restrict__ g, int ld,
                                          int outer0, int outer_extent, int inner0,
                                          int inner_extent, bool vec, int tid) {
    constexpr int CHUNKS = K_MAJOR ? BK / 8 : BM / 8;
#pragma unroll
    for (int i = 0; i < CHUNKS_PER_THREAD; ++i) {
        const int id = tid + i * THREADS;
        const int row = id / CHUNKS;
        const int chunk = id % CHUNKS;
        const int outer = outer0 + row;
        const int inner = inner0 + chunk * 8;
        const int count = outer < outer_extent ? clamp_0_8(inner_extent - inner) : 0;
        const InT* src = count > 0 ? g + static_cast<long long>(outer) * ld + inner : g;
        const unsigned dst = tile + swizzled<CHUNKS>(row, chunk);
        if (vec) {
            cp_async_16(dst, src, count * 2);
        } else {
            // NOTE: a row that does not start on a 16-byte boundary cannot be copied 16 bytes
            // at a time; read the (up to) 8 halves one by one and store them as one chunk.
            const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
            unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if (j < count) w[j / 2] |= static_cast<unsigned>(s[j]) << (16 * (j % 2));
            }
            store_shared_16(dst, w[0], w[1], w[2], w[3]);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Output element access (OutT = __half or float) and the block order.
// ---------------------------------------------------------------------------------------

__device__ __forceinline__ float load_out(const float* p) { return *p; }
__device__ __forceinline__ float load_out(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_out_pair(float* p, float v0, float v1) {
    *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}
__device__ __forceinline__ void store_out_pair(__half* p, float v0, float v1) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
}
__device__ __forceinline__ float load_out(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store_out_pair(__nv_bfloat16* p, float v0, float v1) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
}

// v rounded to OutT and back: what a GEMM that stored its result would hand an add.
__device__ __forceinline__ float round_to(float v, const float*) { return v; }
__device__ __forceinline__ float round_to(float v, const __half*) {
    return __half2float(__float2half_rn(v));
}
__device__ __forceinline__ float round_to(float v, const __nv_bfloat16*) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// float32 epilogue; __fmul_rn/__fadd_rn forbid FMA contraction so the NumPy twin's separate
// multiply-then-add is the same arithmetic.
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
    // NOTE: not fmaxf(v, 0): that turns NaN into 0 and would hide an overflow from the scaler.
    if (flags & EPILOGUE_RELU) v = v < 0.0f ? 0.0f : v;
    return v;
}

// Block b -> output tile (tile_m, tile_n): down GROUP_M tile rows, then to the next column.
__device__ __forceinline__ void grouped_tile(int b, int tiles_m, int tiles_n, int& tile_m,
                                             int& tile_n) {
    const int per_group = GROUP_M * tiles_n;
    const int group = b / per_group;
    const int first_m = group * GROUP_M;
    const int rows = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
    const int in_group = b - group * per_group;
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
}

// ---------------------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------------------

// The body of both kernels; InT (__half or __nv_bfloat16) picks only the mma instruction.
template <typename InT, bool TRANS_A, bool TRANS_B, typename OutT>
__device__ __forceinline__ void gemm_body(const InT* __restrict__ A, const InT* __restrict__ B,
                                          OutT* C, const OutT* bias, int M, int N, int K,
                                          int lda, int ldb, int ldc, float alpha, float beta,
                                          int flags, long long stride_a, long long stride_b,
                                          long long stride_c) {
    // This block's batch entry (BATCHES above): its three matrices, then the same tile work.
    const long long entry = static_cast<long long>(blockIdx.y);
    A += entry * stride_a;
    B += entry * stride_b;
    C += entry * stride_c;
    const unsigned smem = smem_address(dynamic_smem());
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int warp_m = warp / WARPS_N;
    const int warp_n = warp % WARPS_N;

    int tile_m, tile_n;
    grouped_tile(static_cast<int>(blockIdx.x), (M + BM - 1) / BM, (N + BN - 1) / BN, tile_m,
                 tile_n);
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;

    // 16-byte copies, or element by element: decided once per operand, the same for all.
    const bool a_vec = vectorizable(A, lda);
    const bool b_vec = vectorizable(B, ldb);
    // Tile kt of A and B into `stage`. Each tile keeps its global orientation: A is K-major
    // in shared memory unless transposed, B only when transposed.
    auto load_stage = [&](int stage, int kt) {
        const unsigned a_tile = smem + stage * STAGE_BYTES;
        const unsigned b_tile = a_tile + TILE_BYTES;
        const int k0 = kt * BK;
        if constexpr (TRANS_A) load_tile<false>(a_tile, A, lda, k0, K, m0, M, a_vec, tid);
        else load_tile<true>(a_tile, A, lda, m0, M, k0, K, a_vec, tid);
        if constexpr (TRANS_B) load_tile<true>(b_tile, B, ldb, n0, N, k0, K, b_vec, tid);
        else load_tile<false>(b_tile, B, ldb, k0, K, n0, N, b_vec, tid);
    };

    float acc[MI][NI][4] = {};
    const int k_tiles = (K + BK - 1) / BK;

    // Prologue: tiles 0 .. STAGES-2 in flight, one commit group per tile (empty groups are
    // committed too, so "group kt" always means "tile kt").
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    // Which rows/chunks this lane addresses for ldmatrix: lanes 8q..8q+7 point at the rows
    // of matrix q (see FRAGMENTS in the header comment).
    const int q = lane / 8;
    const int r = lane % 8;

#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        cp_async_wait<STAGES - 2>();  // my copies of tile kt have landed ...
        __syncthreads();              // ... and everyone's; stage (kt-1) % STAGES is free
        const int next = kt + STAGES - 1;
        if (next < k_tiles) load_stage(next % STAGES, next);
        cp_async_commit();

        const unsigned a_tile = smem + (kt % STAGES) * STAGE_BYTES;
        const unsigned b_tile = a_tile + TILE_BYTES;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned a[MI][4];
            unsigned b[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int m = warp_m * WM + mi * 16;  // first row of this 16 x 16 A block
                if constexpr (TRANS_A) {
                    // stored [k][m]: matrix q covers k 8*(q/2).. and m 8*(q%2)..
                    const int row = kk * 16 + (q / 2) * 8 + r;
                    ldmatrix_x4_trans(a[mi][0], a[mi][1], a[mi][2], a[mi][3],
                                      a_tile + swizzled<BM / 8>(row, m / 8 + q % 2));
                } else {
                    // stored [m][k]: matrix q covers m 8*(q%2).. and k 8*(q/2)..
                    const int row = m + (q % 2) * 8 + r;
                    ldmatrix_x4(a[mi][0], a[mi][1], a[mi][2], a[mi][3],
                                a_tile + swizzled<BK / 8>(row, kk * 2 + q / 2));
                }
            }
#pragma unroll
            for (int p = 0; p < NI / 2; ++p) {  // one x4 covers two n8 tiles x k16
                const int n = warp_n * WN + p * 16;
                if constexpr (TRANS_B) {
                    // stored [n][k]: matrix q covers n 8*(q/2).. and k 8*(q%2)..
                    const int row = n + (q / 2) * 8 + r;
                    ldmatrix_x4(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1],
                                b_tile + swizzled<BK / 8>(row, kk * 2 + q % 2));
                } else {
                    // stored [k][n]: matrix q covers k 8*(q%2).. and n 8*(q/2)..
                    const int row = kk * 16 + (q % 2) * 8 + r;
                    ldmatrix_x4_trans(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0],
                                      b[2 * p + 1][1],
                                      b_tile + swizzled<BN / 8>(row, n / 8 + q / 2));
                }
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) Mma<InT>::run(acc[mi][ni], a[mi], b[ni]);
            }
        }
    }
    cp_async_wait<0>();  // only empty groups can be left; leave nothing in flight

    // Epilogue straight from the accumulators: lane 4g+t owns rows g and g+8, columns 2t and
    // 2t+1 of every 16 x 8 tile. Pairs are stored together when C allows 2-element stores.
    const int g = lane / 4;
    const int t = lane % 4;
    const bool pairs = ldc % 2 == 0 &&
                       (reinterpret_cast<unsigned long long>(C) % (2 * sizeof(OutT))) == 0;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int col = n0 + warp_n * WN + ni * 8 + 2 * t;
            if (col >= N) continue;
            const bool two = col + 1 < N;
            float bias0 = 0.0f, bias1 = 0.0f;
            if (flags & EPILOGUE_BIAS) {
                bias0 = load_out(bias + col);
                if (two) bias1 = load_out(bias + col + 1);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + warp_m * WM + mi * 16 + g + 8 * h;
                if (row >= M) continue;
                OutT* out = C + static_cast<long long>(row) * ldc + col;
                float c_in[2] = {0.0f, 0.0f};
                if (beta != 0.0f) {
                    c_in[0] = load_out(out);
                    if (two) c_in[1] = load_out(out + 1);
                }
                const float* v = acc[mi][ni] + 2 * h;
                const float v0 = epilogue<OutT>(v[0], c_in[0], alpha, beta, bias0, flags);
                const float v1 = epilogue<OutT>(v[1], c_in[1], alpha, beta, bias1, flags);
                if (two && pairs) {
                    store_out_pair(out, v0, v1);
                } else {
                    store_out(out, v0);
                    if (two) store_out(out + 1, v1);
                }
            }
        }
    }
}

template <bool TRANS_A, bool TRANS_B, typename OutT>
__global__ void __launch_bounds__(THREADS, 2)
    gemm_f16(const __half* __restrict__ A, const __half* __restrict__ B, OutT* C,
             const OutT* bias, int M, int N, int K, int lda, int ldb, int ldc, float alpha,
             float beta, int flags, long long stride_a, long long stride_b, long long stride_c) {
    gemm_body<__half, TRANS_A, TRANS_B, OutT>(A, B, C, bias, M, N, K, lda, ldb, ldc, alpha,
                                               beta, flags, stride_a, stride_b, stride_c);
}

template <bool TRANS_A, bool TRANS_B, typename OutT>
__global__ void __launch_bounds__(THREADS, 2)
    gemm_bf16(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
              OutT* C, const OutT* bias, int M, int N, int K, int lda, int ldb, int ldc,
              float alpha, float beta, int flags, long long stride_a, long long stride_b,
              long long stride_c) {
    gemm_body<__nv_bfloat16, TRANS_A, TRANS_B, OutT>(A, B, C, bias, M, N, K, lda, ldb, ldc,
                                                      alpha, beta, flags, stride_a, stride_b,
                                                      stride_c);
}

// The kernels backend/gemm.py registers (NVRTC instantiates them from the name
// expressions; these explicit instantiations make `nvcc -c` build them too).
#define GEMM_INSTANTIATE(TA, TB, OUT)                                                         \
    template __global__ void gemm_f16<TA, TB, OUT>(const __half* __restrict__,                \
                                                   const __half* __restrict__, OUT*,          \
                                                   const OUT*, int, int, int, int, int, int,  \
                                                   float, float, int, long long, long long,   \
                                                   long long);
GEMM_INSTANTIATE(false, false, __half)
GEMM_INSTANTIATE(false, true, __half)
GEMM_INSTANTIATE(true, false, __half)
GEMM_INSTANTIATE(false, false, float)
GEMM_INSTANTIATE(false, true, float)
GEMM_INSTANTIATE(true, false, float)
#undef GEMM_INSTANTIATE
#define GEMM_BF16_INSTANTIATE(TA, TB, OUT)                                                     \
    template __global__ void gemm_bf16<TA, TB, OUT>(const __nv_bfloat16* __restrict__,         \
                                                    const __nv_bfloat16* __restrict__, OUT*,   \
                                                    const OUT*, int, int, int, int, int, int,  \
                                                    float, float, int, long long, long long,   \
                                                    long long);
GEMM_BF16_INSTANTIATE(false, false, __nv_bfloat16)
GEMM_BF16_INSTANTIATE(false, true, __nv_bfloat16)
GEMM_BF16_INSTANTIATE(true, false, __nv_bfloat16)
GEMM_BF16_INSTANTIATE(false, false, float)
GEMM_BF16_INSTANTIATE(false, true, float)
GEMM_BF16_INSTANTIATE(true, false, float)
#undef GEMM_BF16_INSTANTIATE

