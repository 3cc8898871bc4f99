// gemm_sm90_emulator.cpp: run cuda/gemm_sm90.cu on a CPU, one cooperative fiber per thread.
//
// The Hopper kernel's correctness lives in things a CPU can model exactly: which TMA box
// lands where (coordinates, the 128-byte swizzle, zero fill outside the matrix), whether the
// wgmma descriptors (start address, LBO, SBO, swizzle mode, transpose flags) read back the
// elements the boxes put there, which thread owns which accumulator, the mbarrier protocol
// (phases, parities, arrival and byte counts) that hands stages between the producer and
// the consumers, the persistent work loop, split-K and the epilogue. This program compiles
// the kernel file unchanged except for its hardware layer, replaced by models written from
// the PTX ISA manual and the CUDA driver API's description of tensor maps:
//   * TMA: cp.async.bulk.tensor.2d copies box (x, y) of the tensor map at once (the earliest
//     it could land) and completes its bytes on the mbarrier; element (row r, column e) of
//     the box goes to dst + 128 r + 2 e with address bits 4-6 XOR bits 7-9 (128-byte
//     swizzle); outside the matrix it writes zeros. dst must be 1024-byte aligned.
//   * mbarrier: init(count), arrive, arrive.expect_tx, complete_tx; a phase completes when
//     all arrivals and all announced bytes are in; try_wait.parity(p) succeeds once the
//     number of completed phases has parity != p.
//   * wgmma.mma_async m64n128k16: a warpgroup-wide operation (its 128 threads meet at each
//     group), queued per thread at issue and executed at the wait_group that retires it (the latest it could read shared memory), reading its
//     operands through the descriptors: K-major element (r, k) at start + 128 (r % 8) +
//     SBO (r / 8) + 2k; MN-major element (x, k) at start + LBO (x / 64) + 2 (x % 64) +
//     128 (k % 8) + SBO (k / 8); both then swizzled like TMA's writes.
// Threads are scheduled "early" (the lowest runnable thread first: the producer runs as
// far ahead as the barriers allow) or "late" (round robin). Shared memory starts 16 bytes
// past a 1024-byte boundary, so the kernel's own alignment is exercised; it is filled with
// float16 NaNs, so a stage read before its bytes land shows up in the result.
//
// Build: g++ -std=c++17 -O2 -ffp-contract=off -I<cuda>/include -I<repo>/cuda <this file>
// Run:   gemm_sm90_emulator TA TB OUT BN M N K alpha beta flags splits grid mode
//            a_dim0 a_dim1 a_stride a_box0 a_box1 b_dim0 b_dim1 b_stride b_box0 b_box1
//            a.bin b.bin c.bin bias.bin out.bin
//   (the a_/b_ values are backend/gemm_sm90.map_spec's; ldc = N; bias.bin may be "-")
//   Prints "ok ctas=<n> tma=<n> wgmma=<n>" and writes C to out.bin.

#include <cuda_fp16.h>
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#define MINITORCH_GEMM_HOST_EMULATION
#define __launch_bounds__(...)
#ifndef __grid_constant__
#define __grid_constant__
#endif

#define SM90_EMULATOR_NAME "gemm_sm90_emulator"

struct WgmmaOp {  // one queued wgmma.mma_async, executed at the wait_group that retires it
    float* d;
    unsigned long long desc_a, desc_b;
    int accumulate, trans_a, trans_b;
};

#include "sm90_emulator_core.h"

struct TensorMap;  // gemm_sm90.cu defines it: 16 words, here pointer, dims, stride, box
void tma_prefetch(const TensorMap*) {}
void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar);

// ---- wgmma --------------------------------------------------------------------------------

static float half_table[65536];

static float operand(unsigned long long desc, bool mn_major, int x, int k) {
    check(((desc >> 62) & 3u) == 1, "wgmma: descriptor is not 128-byte swizzled");
    check(((desc >> 49) & 7u) == 0, "wgmma: the base-offset bits must be 0");
    const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
    const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3FFF) << 4;
    const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
    const unsigned addr = mn_major ? start + lbo * (x / 64) + 2 * (x % 64) + 128 * (k % 8) + sbo * (k / 8)
                                   : start + 128 * (x % 8) + sbo * (x / 8) + 2 * k;
    unsigned short h;
    std::memcpy(&h, at(swizzle128(addr), 2, "wgmma: operand outside shared memory"), 2);
    return half_table[h];
}

static void execute(const WgmmaOp& op) {
    const int lane128 = current % 128;
    const int warp = lane128 / 32, g = (lane128 % 32) / 4, t = lane128 % 4;
    for (int i = 0; i < 64; ++i) {
        const int row = 16 * warp + g + 8 * ((i / 2) % 2);
        const int col = 8 * (i / 4) + 2 * t + i % 2;
        float sum = op.accumulate ? op.d[i] : 0.0f;
        for (int k = 0; k < 16; ++k)
            sum += operand(op.desc_a, op.trans_a, row, k) * operand(op.desc_b, op.trans_b, col, k);
        op.d[i] = sum;
    }
}

template <typename In, int TRANS_A, int TRANS_B>
void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b,
                      int accumulate) {
    check(current >= 128, "wgmma issued by the producer warpgroup");
    fibers[current].uncommitted.push_back({d, desc_a, desc_b, accumulate, TRANS_A, TRANS_B});
    ++wgmma_count;
}
// wgmma is a warpgroup-wide operation: it starts only once all 128 threads have issued it,
// so the warps of a warpgroup meet at every wgmma group (modelled at fence and commit).
void wgmma_fence() { warpgroup_barrier[current / 128].arrive_and_wait(128); }
void wgmma_commit() {
    warpgroup_barrier[current / 128].arrive_and_wait(128);
    Fiber& f = fibers[current];
    f.groups.push_back(f.uncommitted);
    f.uncommitted.clear();
}
template <int N>
void wgmma_wait() {
    Fiber& f = fibers[current];
    check(f.uncommitted.empty(), "wgmma.wait_group with uncommitted wgmma");
    while (f.groups.size() > static_cast<size_t>(N)) {
        for (const WgmmaOp& op : f.groups.front()) execute(op);
        f.groups.pop_front();
    }
    // A group completes for the whole warpgroup at once: nobody goes on (and frees a stage)
    // before every thread's share of it has read shared memory.
    warpgroup_barrier[current / 128].arrive_and_wait(128);
}
template <int REGS>
void setmaxnreg_dec() {}
template <int REGS>
void setmaxnreg_inc() {}

#include "gemm_sm90.cu"

#include "sm90_emulator_grid.h"

template <bool TA, bool TB, typename OutT, int BN, bool PP>
static void launch(char** argv) {
    const int M = std::atoi(argv[5]), N = std::atoi(argv[6]), K = std::atoi(argv[7]);
    const float alpha = std::strtof(argv[8], nullptr), beta = std::strtof(argv[9], nullptr);
    const int flags = std::atoi(argv[10]), splits = std::atoi(argv[11]);
    const int grid = std::atoi(argv[12]);
    mode = std::string(argv[13]) == "late" ? LATE : EARLY;
    const std::vector<unsigned char> a = read_file(argv[24]), b = read_file(argv[25]);
    std::vector<unsigned char> c = read_file(argv[26]);
    std::vector<unsigned char> bias_data;
    if (std::string(argv[27]) != "-") bias_data = read_file(argv[27]);
    const TensorMap map_a = make_map(a, argv + 14), map_b = make_map(b, argv + 19);
    auto* C = reinterpret_cast<OutT*>(c.data());
    const OutT* bias = bias_data.empty() ? C : reinterpret_cast<const OutT*>(bias_data.data());
    std::vector<float> partial(splits > 1 ? static_cast<size_t>(splits) * M * N : 1);
    for (float& x : partial) std::memcpy(&x, &kUnwritten, sizeof x);  // (see __ldcg)
    // the split counts, zero as the launcher hands them (a tile piece per warp of a consumer)
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    std::vector<unsigned> counts(static_cast<size_t>(tiles) * CONSUMERS * 4, 0u);
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    blockDim = {kThreads, 1, 1};
    kernel_body = [&] {
        gemm_sm90<TA, TB, OutT, __half, BN, PP>(map_a, map_b, C, bias, partial.data(),
                                                counts.data(), M, N, K, N, alpha, beta, flags,
                                                splits);
    };
    for (int cta = 0; cta < grid; ++cta) run_cta(cta, BN);
    for (unsigned count : counts) check(count == 0u, "split-K: a count was not set back to 0");
    FILE* out = std::fopen(argv[28], "wb");
    check(out != nullptr && std::fwrite(c.data(), 1, c.size(), out) == c.size(),
          "cannot write output");
    std::fclose(out);
    std::printf("ok ctas=%d tma=%lld wgmma=%lld\n", grid, tma_count, wgmma_count);
}

template <bool TA, bool TB, typename OutT>
static void launch_bn(char** argv) {
    // BN: 128, 256, or 128p (128 with the ping-pong schedule)
    if (std::string(argv[4]) == "256") launch<TA, TB, OutT, 256, false>(argv);
    else if (std::string(argv[4]) == "128p") launch<TA, TB, OutT, 128, true>(argv);
    else launch<TA, TB, OutT, 128, false>(argv);
}

int main(int argc, char** argv) {
    if (argc != 29) fail("usage: see the header of gemm_sm90_emulator.cpp");
    for (unsigned bits = 0; bits < 65536; ++bits) {
        __half_raw raw;
        raw.x = static_cast<unsigned short>(bits);
        half_table[bits] = __half2float(__half(raw));
    }
    const std::string layout = std::string(argv[1]) + argv[2] + argv[3];
    if (layout == "00f16") launch_bn<false, false, __half>(argv);
    else if (layout == "01f16") launch_bn<false, true, __half>(argv);
    else if (layout == "10f16") launch_bn<true, false, __half>(argv);
    else if (layout == "00f32") launch_bn<false, false, float>(argv);
    else if (layout == "01f32") launch_bn<false, true, float>(argv);
    else if (layout == "10f32") launch_bn<true, false, float>(argv);
    else fail("unknown layout: TA, TB in {00, 01, 10}, OUT in {f16, f32}");
    return 0;
}
