// fp8_gemm_emulator.cpp: run cuda/gemm_fp8_sm90.cu on a CPU, one cooperative fiber per thread.
//
// The FP8 kernel is gemm_sm90.cu's pipeline with another instruction, so its correctness
// lives where that kernel's does (tests/gemm_sm90_emulator.cpp says which): TMA boxes and
// their 128-byte swizzle, descriptors that read back what the boxes put there (here: 32-byte
// FP8 k-slices inside a 128-byte row), the accumulator fragment, the mbarrier protocol
// between the producer and the consumers, the persistent work loop and the epilogue (the
// inverse scales read on the device, the one rounding, the pair stores and the edges). This
// program compiles the kernel file unchanged except for the hardware layer, replaced by the
// models of gemm_sm90_emulator.cpp (fibers, mbarriers, TMA), restated here for FP8:
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
//            a.bin b_t.bin scales.bin out.bin
//   OUT in f32, f16, bf16; AF, BF 0 (e4m3) or 1 (e5m2); the a_/b_ values are
//   backend/gemm_sm90.map_spec's of the operands viewed as two-byte words; scales.bin holds
//   scale_a, scale_b (float32). Prints "ok ctas=<n> tma=<n> wgmma=<n>", writes C to out.bin.

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

[[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "fp8_gemm_emulator: %s\n", what);
    std::exit(2);
}
static void check(bool ok, const char* what) {
    if (!ok) fail(what);
}

// ---- fibers (gemm_sm90_emulator.cpp's) -----------------------------------------------------

constexpr int kThreads = 384;
constexpr size_t kStackBytes = 128 * 1024;
constexpr unsigned kSmemBase = 16;

struct WgmmaOp {
    float* d;
    unsigned long long desc_a, desc_b;
    int accumulate, a_fmt, b_fmt;
};

struct Fiber {
    ucontext_t context;
    std::vector<char> stack = std::vector<char>(kStackBytes);
    bool done = false;
    std::function<bool()> waiting;
    std::vector<WgmmaOp> uncommitted;
    std::deque<std::vector<WgmmaOp>> groups;
};

static std::vector<Fiber> fibers(kThreads);
static ucontext_t scheduler;
static int current = 0;
static std::function<void()> kernel_body;
uint3 threadIdx, blockIdx, gridDim, blockDim;

enum Mode { EARLY, LATE };
static Mode mode = EARLY;

static bool runnable(const Fiber& f) { return !f.done && (!f.waiting || f.waiting()); }

static int next_runnable() {
    const int first = mode == EARLY ? 0 : (current + 1) % kThreads;
    for (int i = 0; i < kThreads; ++i) {
        const int t = (first + i) % kThreads;
        if (runnable(fibers[t])) return t;
    }
    return -1;
}

static void switch_to(int next) {
    Fiber& from = fibers[current];
    current = next;
    threadIdx = {static_cast<unsigned>(next), 0, 0};
    swapcontext(&from.context, &fibers[next].context);
}

static void wait_until(std::function<bool()> ready) {
    if (ready()) {
        if (mode == LATE) {
            const int next = next_runnable();
            if (next >= 0 && next != current) switch_to(next);
        }
        return;
    }
    fibers[current].waiting = ready;
    const int next = next_runnable();
    if (next < 0) swapcontext(&fibers[current].context, &scheduler);  // deadlock
    else if (next != current) switch_to(next);
    fibers[current].waiting = nullptr;
}

struct Barrier {
    int count = 0;
    unsigned long long generation = 0;
    void arrive_and_wait(int size) {
        const unsigned long long mine = generation;
        if (++count == size) {
            count = 0;
            ++generation;
            return;
        }
        wait_until([this, mine] { return generation != mine; });
    }
};
static Barrier block_barrier;
static Barrier warpgroup_barrier[kThreads / 128];

void __syncthreads() { block_barrier.arrive_and_wait(kThreads); }

// ---- shared memory, mbarriers, TMA ---------------------------------------------------------

static std::vector<unsigned char> smem;
static long long tma_count = 0, wgmma_count = 0;

float __fmul_rn(float a, float b) { return a * b; }  // built with -ffp-contract=off
float __fadd_rn(float a, float b) { return a + b; }

unsigned char* dynamic_smem() { return smem.data(); }
unsigned smem_address(const void* p) {
    return kSmemBase + static_cast<unsigned>(static_cast<const unsigned char*>(p) - smem.data());
}
static unsigned char* at(unsigned addr, unsigned bytes, const char* what) {
    check(addr >= kSmemBase && addr - kSmemBase + bytes <= smem.size(), what);
    return smem.data() + (addr - kSmemBase);
}
static unsigned swizzle128(unsigned addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

struct MBarrier {
    int count = 0, pending = 0;
    long long tx = 0;
    unsigned long long completed = 0;
};
static std::map<unsigned, MBarrier> barriers;

static MBarrier& barrier(unsigned bar) {
    check(bar % 8 == 0, "mbarrier: not 8-byte aligned");
    at(bar, 8, "mbarrier: outside shared memory");
    auto it = barriers.find(bar);
    check(it != barriers.end(), "mbarrier: used before mbarrier.init");
    return it->second;
}
static void maybe_complete(MBarrier& b) {
    if (b.pending == 0 && b.tx == 0) {
        ++b.completed;
        b.pending = b.count;
    }
}

void mbar_init(unsigned bar, unsigned count) {
    at(bar, 8, "mbarrier.init: outside shared memory");
    check(bar % 8 == 0 && count > 0, "mbarrier.init: misaligned or zero count");
    barriers[bar] = MBarrier{static_cast<int>(count), static_cast<int>(count), 0, 0};
}
void mbar_init_fence() {}
void mbar_arrive(unsigned bar) {
    MBarrier& b = barrier(bar);
    check(b.pending > 0, "mbarrier: more arrivals than its count");
    --b.pending;
    maybe_complete(b);
}
void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    barrier(bar).tx += bytes;
    mbar_arrive(bar);
}
void mbar_wait(unsigned bar, unsigned parity) {
    check(parity <= 1, "mbarrier.try_wait.parity: parity is 0 or 1");
    MBarrier* b = &barrier(bar);
    wait_until([b, parity] { return (b->completed & 1u) != parity; });
}

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

// ---- TMA (gemm_sm90_emulator.cpp's model: boxes of two-byte words) -------------------------

static std::vector<std::pair<const unsigned char*, const unsigned char*>> readable;

void tma_load_2d(unsigned dst, const TensorMap* map, int x, int y, unsigned bar) {
    const auto* base = reinterpret_cast<const unsigned char*>(map->opaque[0]);
    const long long dim0 = map->opaque[1], dim1 = map->opaque[2], stride = map->opaque[3];
    const int box0 = static_cast<int>(map->opaque[4]), box1 = static_cast<int>(map->opaque[5]);
    check(box0 * 2 == 128, "TMA: a 128-byte swizzle needs boxes 128 bytes wide");
    check(box1 >= 1 && box1 <= 256, "TMA: box rows must be 1..256");
    check(dst % 1024 == 0, "TMA: a 128-byte-swizzled box must start 1024-byte aligned");
    at(dst, box0 * box1 * 2, "TMA: box outside shared memory");
    for (int r = 0; r < box1; ++r) {
        for (int e = 0; e < box0; ++e) {
            const long long gx = static_cast<long long>(x) + e, gy = static_cast<long long>(y) + r;
            unsigned short v = 0;
            if (gx >= 0 && gx < dim0 && gy >= 0 && gy < dim1) {
                const unsigned char* src = base + gy * stride + gx * 2;
                bool inside = false;
                for (const auto& range : readable)
                    inside |= src >= range.first && src + 2 <= range.second;
                check(inside, "TMA: the tensor map reaches outside its matrix");
                std::memcpy(&v, src, 2);
            }
            std::memcpy(at(swizzle128(dst + r * 128 + e * 2), 2, "TMA: write"), &v, 2);
        }
    }
    ++tma_count;
    MBarrier& b = barrier(bar);
    b.tx -= static_cast<long long>(box0) * box1 * 2;
    maybe_complete(b);
}

// ---- running a grid ------------------------------------------------------------------------

static void fiber_entry() {
    kernel_body();
    fibers[current].done = true;
}

static void run_cta(int cta, int bn) {
    blockIdx = {static_cast<unsigned>(cta), 0, 0};
    smem.assign(smem_bytes(bn), 0xff);
    barriers.clear();
    block_barrier = Barrier{};
    for (Barrier& b : warpgroup_barrier) b = Barrier{};
    for (int t = 0; t < kThreads; ++t) {
        Fiber& f = fibers[t];
        f.done = false;
        f.waiting = nullptr;
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.data();
        f.context.uc_stack.ss_size = f.stack.size();
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_entry, 0);
    }
    current = kThreads - 1;
    for (int next; (next = next_runnable()) >= 0;) {
        current = next;
        threadIdx = {static_cast<unsigned>(next), 0, 0};
        swapcontext(&scheduler, &fibers[next].context);
    }
    for (const Fiber& f : fibers) check(f.done, "deadlock: threads wait for each other");
    for (const Fiber& f : fibers)
        check(f.uncommitted.empty() && f.groups.empty(), "a wgmma was never waited for");
}

static std::vector<unsigned char> read_file(const char* path) {
    std::vector<unsigned char> data;
    FILE* f = std::fopen(path, "rb");
    check(f != nullptr, "cannot open an input file");
    unsigned char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
        data.insert(data.end(), buffer, buffer + n);
    std::fclose(f);
    return data;
}

static TensorMap make_map(const std::vector<unsigned char>& data, char** v) {
    TensorMap map{};
    map.opaque[0] = reinterpret_cast<unsigned long long>(data.data());
    for (int i = 0; i < 5; ++i) map.opaque[1 + i] = std::strtoull(v[i], nullptr, 10);
    check(map.opaque[3] % 16 == 0, "tensor map: the row stride must be a multiple of 16 bytes");
    readable.push_back({data.data(), data.data() + data.size()});
    return map;
}

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
    std::vector<OutT> c(static_cast<size_t>(M) * N);
    std::memset(c.data(), 0xff, c.size() * sizeof(OutT));  // NaN: what is never written shows
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    blockDim = {kThreads, 1, 1};
    kernel_body = [&] {
        gemm_fp8_sm90<OutT, AF, BF, BN>(map_a, map_b, c.data(), scale, scale + 1, M, N, K, N);
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
    if (argc != 24) fail("usage: see the header of fp8_gemm_emulator.cpp");
    for (int fmt = 0; fmt < 2; ++fmt)
        for (unsigned bits = 0; bits < 256; ++bits) fp8_table[fmt][bits] = decode(bits, fmt);
    const std::string out = argv[1];
    if (out == "f32") launch_formats<float>(argv);
    else if (out == "f16") launch_formats<__half>(argv);
    else if (out == "bf16") launch_formats<__nv_bfloat16>(argv);
    else fail("unknown output type: f32, f16 or bf16");
    return 0;
}
