// fp8_gemm_emulator.cpp: run cuda/gemm_fp8_sm90.cu on a CPU, one cooperative fiber per thread.
//
// The FP8 kernel is gemm_sm90.cu's pipeline with another instruction, so its correctness
// lives where that kernel's does (tests/gemm_sm90_emulator.cpp says which): TMA boxes and
// their 128-byte swizzle, descriptors that read back what the boxes put there (here: 32-byte
// FP8 k-slices inside a 128-byte row), the accumulator fragment, the mbarrier protocol
// between the producer and the consumers, the persistent work loop and the epilogue (the
// inverse scales read on the device, the one rounding, the pair stores and the edges). This
// program compiles the kernel file unchanged except for the hardware layer, replaced by the
// models gemm_sm90_emulator.cpp uses too (fibers, mbarriers and TMA, shared through
// sm90_emulator_core.h and sm90_emulator_grid.h), and this file's own for FP8:
//   * wgmma.mma_async m64n128k32 with e4m3 / e5m2 operands: warpgroup-wide, queued at issue
//     and executed at the wait_group that retires it (the latest it could read shared
//     memory); K-major element (r, k) at start + 128 (r % 8) + SBO (r / 8) + k, swizzled,
//     decoded exactly (E4M3: bias 7, no inf, S.1111.111 NaN; E5M2: bias 15, IEEE-like),
//     products and sums in float32, k in order.
// Shared memory starts 16 bytes past a 1024-byte boundary and is filled with 0xFF bytes
// (NaN in both formats), so a stage read before its bytes land shows up as NaN.
// gemm_sm90.cu's own kernels are not instantiated (the file is read as NVRTC reads it), so
// the 16-bit wgmma needs only a declaration.
//
// Build: g++ -std=c++17 -O1 -ffp-contract=off -w -I<cuda>/include -I<repo>/cuda <this file>
// Run:   fp8_gemm_emulator OUT AF BF BN M N K grid mode
//            a_dim0 a_dim1 a_stride a_box0 a_box1 b_dim0 b_dim1 b_stride b_box0 b_box1
//            a.bin b_t.bin scales.bin out.bin bias.bin
//   OUT in f32, f16, bf16; AF, BF 0 (e4m3) or 1 (e5m2); the a_/b_ values are
//   backend/gemm_sm90.map_spec's of the operands viewed as two-byte words; scales.bin holds
//   scale_a, scale_b (float32); bias.bin N OutT values, or - for no bias. Prints
//   "ok ctas=<n> tma=<n> wgmma=<n>", writes C to out.bin.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

#define SM90_EMULATOR_NAME "fp8_gemm_emulator"

struct WgmmaOp {  // one queued FP8 wgmma (operand formats: 0 E4M3, 1 E5M2)
    float* d;
    unsigned long long desc_a, desc_b;
    int accumulate, a_fmt, b_fmt;
};

#include "sm90_emulator_core.h"

struct TensorMap;
void tma_prefetch(const TensorMap*) {}
void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar);

// ---- wgmma ---------------------------------------------------------------------------------

// The exact value of every FP8 byte, from the formats' definitions (not from the kernel).
static float fp8_table[2][256];

static float decode(unsigned bits, int fmt) {
    const int mantissa = fmt == 0 ? 3 : 2, bias = fmt == 0 ? 7 : 15;
    const int e = static_cast<int>((bits & 0x7F) >> mantissa);
    const int f = static_cast<int>(bits & ((1u << mantissa) - 1));
    const float sign = bits & 0x80 ? -1.0f : 1.0f;
    if (fmt == 0 && (bits & 0x7F) == 0x7F) return std::nanf("");
    if (fmt == 1 && e == 31) return f == 0 ? sign * INFINITY : std::nanf("");
    if (e == 0) return sign * std::ldexp(static_cast<float>(f), 1 - bias - mantissa);
    return sign * std::ldexp(static_cast<float>((1 << mantissa) + f), e - bias - mantissa);
}

static float operand(unsigned long long desc, int fmt, int x, int k) {
    check(((desc >> 62) & 3u) == 1, "wgmma: descriptor is not 128-byte swizzled");
    check(((desc >> 49) & 7u) == 0, "wgmma: the base-offset bits must be 0");
    const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
    const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
    const unsigned addr = start + 128 * (x % 8) + sbo * (x / 8) + k;  // K-major, 1-byte values
    return fp8_table[fmt][*at(swizzle128(addr), 1, "wgmma: operand outside shared memory")];
}

static void execute(const WgmmaOp& op) {
    const int lane128 = current % 128;
    const int warp = lane128 / 32, g = (lane128 % 32) / 4, t = lane128 % 4;
    for (int i = 0; i < 64; ++i) {
        const int row = 16 * warp + g + 8 * ((i / 2) % 2);
        const int col = 8 * (i / 4) + 2 * t + i % 2;
        float sum = op.accumulate ? op.d[i] : 0.0f;
        for (int k = 0; k < 32; ++k)
            sum += operand(op.desc_a, op.a_fmt, row, k) * operand(op.desc_b, op.b_fmt, col, k);
        op.d[i] = sum;
    }
}

template <typename In, int TRANS_A, int TRANS_B>
void wgmma_m64n128k16(float (&d)[64], unsigned long long, unsigned long long, int);  // unused

template <int A_FMT, int B_FMT>
void wgmma_fp8_m64n128k32(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b,
                          int accumulate) {
    check(current >= 128, "wgmma issued by the producer warpgroup");
    fibers[current].uncommitted.push_back({d, desc_a, desc_b, accumulate, A_FMT, B_FMT});
    ++wgmma_count;
}
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
    warpgroup_barrier[current / 128].arrive_and_wait(128);
}
template <int REGS>
void setmaxnreg_dec() {}
template <int REGS>
void setmaxnreg_inc() {}

// Read the kernel files as NVRTC does: only what this program instantiates is compiled.
#define __CUDACC_RTC__
#include "gemm_fp8_sm90.cu"
#undef __CUDACC_RTC__

#include "sm90_emulator_grid.h"

template <typename OutT, int AF, int BF, int BN>
static void launch(char** argv) {
    const int M = std::atoi(argv[5]), N = std::atoi(argv[6]), K = std::atoi(argv[7]);
    const int grid = std::atoi(argv[8]);
    mode = std::string(argv[9]) == "late" ? LATE : EARLY;
    const std::vector<unsigned char> a = read_file(argv[20]), b = read_file(argv[21]);
    const std::vector<unsigned char> scales = read_file(argv[22]);
    check(scales.size() == 8, "scales.bin holds two float32 values");
    const auto* scale = reinterpret_cast<const float*>(scales.data());
    const TensorMap map_a = make_map(a, argv + 10), map_b = make_map(b, argv + 15);
    std::vector<unsigned char> bias;  // bias.bin: N OutT values, or "-" for none
    if (std::string(argv[24]) != "-") {
        bias = read_file(argv[24]);
        check(bias.size() == static_cast<size_t>(N) * sizeof(OutT), "bias.bin holds N values");
    }
    const OutT* bias_ptr = bias.empty() ? nullptr : reinterpret_cast<const OutT*>(bias.data());
    std::vector<OutT> c(static_cast<size_t>(M) * N);
    std::memset(c.data(), 0xff, c.size() * sizeof(OutT));  // NaN: what is never written shows
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    blockDim = {kThreads, 1, 1};
    kernel_body = [&] {
        gemm_fp8_sm90<OutT, AF, BF, BN>(map_a, map_b, c.data(), bias_ptr, scale, scale + 1, M, N,
                                        K, N);
    };
    for (int cta = 0; cta < grid; ++cta) run_cta(cta, BN);
    FILE* out = std::fopen(argv[23], "wb");
    const size_t bytes = c.size() * sizeof(OutT);
    check(out != nullptr && std::fwrite(c.data(), 1, bytes, out) == bytes, "cannot write output");
    std::fclose(out);
    std::printf("ok ctas=%d tma=%lld wgmma=%lld\n", grid, tma_count, wgmma_count);
}

template <typename OutT, int AF, int BF>
static void launch_bn(char** argv) {
    if (std::string(argv[4]) == "256") launch<OutT, AF, BF, 256>(argv);
    else launch<OutT, AF, BF, 128>(argv);
}

template <typename OutT>
static void launch_formats(char** argv) {
    const std::string formats = std::string(argv[2]) + argv[3];
    if (formats == "00") launch_bn<OutT, 0, 0>(argv);
    else if (formats == "01") launch_bn<OutT, 0, 1>(argv);
    else if (formats == "10") launch_bn<OutT, 1, 0>(argv);
    else fail("unknown formats: AF BF in {0 0, 0 1, 1 0}");
}

int main(int argc, char** argv) {
    if (argc != 25) fail("usage: see the header of fp8_gemm_emulator.cpp");
    for (int fmt = 0; fmt < 2; ++fmt)
        for (unsigned bits = 0; bits < 256; ++bits) fp8_table[fmt][bits] = decode(bits, fmt);
    const std::string out = argv[1];
    if (out == "f32") launch_formats<float>(argv);
    else if (out == "f16") launch_formats<__half>(argv);
    else if (out == "bf16") launch_formats<__nv_bfloat16>(argv);
    else fail("unknown output type: f32, f16 or bf16");
    return 0;
}
