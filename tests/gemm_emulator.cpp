// gemm_emulator.cpp: run cuda/gemm_fp16.cu on a CPU, one cooperative fiber per CUDA thread.
//
// The GEMM kernel's correctness lives in index arithmetic: tiles, the swizzle, ldmatrix row
// addresses, which lane owns which accumulator, tails, and the pipeline's stage reuse. This
// program compiles the kernel file unchanged except for its "hardware layer": each PTX
// instruction is replaced by a C++ model written from the PTX ISA manual, and every block's
// 256 threads run as fibers that meet at __syncthreads and at the warp-wide instructions.
// Besides the result (which tests/test_gemm_emulator.py compares with the NumPy twin and a
// float64 error bound) it checks that
//   * every ldmatrix phase is bank-conflict free (its 8 rows on 8 distinct 16-byte groups
//     of banks), every shared-memory access is aligned and inside the buffer;
//   * every cp.async reads only inside A or B, from a 16-byte-aligned address, 0..16 bytes,
//     and no copy is still in flight when the kernel returns;
//   * all 32 lanes of a warp reach the same warp-wide instruction, and no thread waits at a
//     barrier the others never reach (deadlock);
//   * the pipeline is ordered right under two extreme timings of cp.async: "early" (the data
//     lands at issue, and warp 0 runs as far ahead of the others as the barriers allow: a
//     stage overwritten while another warp still reads it gives wrong results) and "late"
//     (it lands at the cp.async.wait_group that retires it, warps take turns: reading a
//     stage before everybody's copies have landed gives wrong results).
// Global buffers end just before an inaccessible page, so running past the end crashes.
//
// Build: g++ -std=c++17 -O2 -ffp-contract=off -I<cuda>/include -I<repo>/cuda gemm_emulator.cpp
// Run:   gemm_emulator TA TB OUT M N K lda ldb ldc alpha beta flags misalign mode
//                      a.bin b.bin c.bin bias.bin out.bin [batches stride_a stride_b stride_c]
//   TA, TB: 0/1; OUT: f16 or f32 (float16 inputs), bf16 or bf16f32 (bfloat16 inputs, bfloat16
//   or float32 output: the gemm_bf16 kernel); misalign: 1 offsets A, B and C by one element;
//   mode: early or late; the .bin files hold raw little-endian arrays (bias.bin may be "-").
//   batches (default 1) runs that many entries as gridDim.y (blockIdx.y = the entry), the
//   entries of A, B and C stride_* elements apart (0: one matrix for all, a broadcast).
//   Prints one line: "ok blocks=<n> ldmatrix=<n> conflicts=<n>" and writes C to out.bin.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#define MINITORCH_GEMM_HOST_EMULATION
#define __launch_bounds__(...)

[[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "gemm_emulator: %s\n", what);
    std::exit(2);
}
static void check(bool ok, const char* what) {
    if (!ok) fail(what);
}

// ---- fibers: one per CUDA thread of the block being run ---------------------------------

constexpr int kThreads = 256;
constexpr size_t kStackBytes = 256 * 1024;

struct Barrier;

struct Copy {
    unsigned dst;
    const void* src;
    int bytes;
};

struct Fiber {
    ucontext_t context;
    std::vector<char> stack = std::vector<char>(kStackBytes);
    bool done = false;
    const Barrier* blocker = nullptr;           // waiting at this barrier ...
    unsigned long long blocked_generation = 0;  // ... until it moves past this generation
    std::vector<Copy> uncommitted;              // cp.async issued since the last commit
    std::deque<std::vector<Copy>> groups;       // committed, not yet retired
};

static std::vector<Fiber> fibers(kThreads);
static ucontext_t scheduler;
static int current = 0;
static std::function<void()> kernel_body;

uint3 threadIdx, blockIdx;

static void yield();

// Arrive at a barrier of `size` threads and wait (by yielding) until all have arrived.
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
        Fiber& f = fibers[current];
        f.blocker = this;
        f.blocked_generation = mine;
        while (generation == mine) yield();
        f.blocker = nullptr;
    }
};

static bool runnable(const Fiber& f) {
    return !f.done && (f.blocker == nullptr || f.blocker->generation != f.blocked_generation);
}

enum Mode { EARLY, LATE };
static Mode mode = EARLY;

// The next thread to run: EARLY always takes the lowest runnable thread, so warp 0 runs as
// far ahead of the others as the barriers allow; LATE goes round robin, every warp one
// step per pass. -1 when nobody can run.
static int next_runnable() {
    const int first = mode == EARLY ? 0 : (current + 1) % kThreads;
    for (int i = 0; i < kThreads; ++i) {
        const int t = (first + i) % kThreads;
        if (runnable(fibers[t])) return t;
    }
    return -1;
}

// A waiting thread hands the CPU straight to the next runnable one (or to the scheduler,
// which reports a deadlock when nobody can run).
static void yield() {
    const int next = next_runnable();
    Fiber& from = fibers[current];
    if (next < 0 || next == current) {
        if (next < 0) swapcontext(&from.context, &scheduler);
        return;
    }
    current = next;
    threadIdx = {static_cast<unsigned>(next), 0, 0};
    swapcontext(&from.context, &fibers[next].context);
}

static Barrier block_barrier;
static Barrier warp_barrier[kThreads / 32];

void __syncthreads() { block_barrier.arrive_and_wait(kThreads); }

// ---- the hardware layer's models ---------------------------------------------------------

static std::vector<unsigned char> smem;
struct Range {
    const unsigned char* lo;
    const unsigned char* hi;
};
static std::vector<Range> readable;  // A and B: where cp.async may read
static long long ldmatrix_count = 0, conflict_count = 0;

float __fmul_rn(float a, float b) { return a * b; }  // built with -ffp-contract=off
float __fadd_rn(float a, float b) { return a + b; }

unsigned char* dynamic_smem() { return smem.data(); }
unsigned smem_address(const void* p) {
    return static_cast<unsigned>(static_cast<const unsigned char*>(p) - smem.data());
}

static void check_smem(unsigned addr, unsigned bytes, const char* what) {
    check(addr % 16 == 0, what);
    check(static_cast<size_t>(addr) + bytes <= smem.size(), what);
}

static void land(const Copy& c) {
    std::memcpy(smem.data() + c.dst, c.src, c.bytes);
    std::memset(smem.data() + c.dst + c.bytes, 0, 16 - c.bytes);  // src-size zero fill
}

void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    check_smem(dst, 16, "cp.async: shared destination misaligned or out of range");
    check(src_bytes >= 0 && src_bytes <= 16, "cp.async: src-size must be 0..16");
    check(reinterpret_cast<uintptr_t>(src) % 16 == 0, "cp.async: source not 16-byte aligned");
    if (src_bytes > 0) {
        const auto* p = static_cast<const unsigned char*>(src);
        bool inside = false;
        for (const Range& r : readable) inside |= p >= r.lo && p + src_bytes <= r.hi;
        check(inside, "cp.async: reads outside A and B");
    }
    const Copy copy{dst, src, src_bytes};
    if (mode == EARLY) land(copy);
    else fibers[current].uncommitted.push_back(copy);
}

void cp_async_commit() {
    Fiber& f = fibers[current];
    f.groups.push_back(f.uncommitted);
    f.uncommitted.clear();
}

template <int N>
void cp_async_wait() {
    Fiber& f = fibers[current];
    while (f.groups.size() > static_cast<size_t>(N)) {
        for (const Copy& c : f.groups.front()) land(c);
        f.groups.pop_front();
    }
}

void store_shared_16(unsigned dst, unsigned w0, unsigned w1, unsigned w2, unsigned w3) {
    check_smem(dst, 16, "st.shared.v4: misaligned or out of range");
    const unsigned w[4] = {w0, w1, w2, w3};
    std::memcpy(smem.data() + dst, w, 16);
}

// A warp-wide instruction: every lane posts its operands, all meet, then every lane computes
// its own results from everybody's operands. Two exchange slots alternate, so a lane that
// races ahead to the next instruction cannot overwrite operands another lane still reads
// (it would have to pass the next meeting, which waits for that lane).
enum Op { LDMATRIX = 1, LDMATRIX_TRANS, MMA };
struct Exchange {
    int op[32];
    unsigned addr[32];
    unsigned a[32][4];
    unsigned b[32][2];
};
static Exchange exchange[kThreads / 32][2];
static unsigned long long warp_instructions[kThreads];  // per thread: how many it issued

static Exchange& slot() { return exchange[current / 32][warp_instructions[current] % 2]; }

static Exchange& post(int op) {
    Exchange& e = slot();
    e.op[current % 32] = op;
    warp_barrier[current / 32].arrive_and_wait(32);
    for (int l = 0; l < 32; ++l) check(e.op[l] == op, "warp diverged at a warp-wide instruction");
    ++warp_instructions[current];
    return e;
}

static unsigned short smem_half(unsigned addr) {
    unsigned short h;
    std::memcpy(&h, smem.data() + addr, 2);
    return h;
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8q..8q+7 address the rows of
// matrix q; lane 4g+t receives in register q the elements (g, 2t) and (g, 2t+1), or with
// .trans the elements (2t, g) and (2t+1, g); the lower column/row index in the low half.
static void ldmatrix_model(bool trans, unsigned* out, unsigned addr) {
    const int lane = current % 32;
    slot().addr[lane] = addr;
    const Exchange& e = post(trans ? LDMATRIX_TRANS : LDMATRIX);
    if (lane == 0) {
        for (int q = 0; q < 4; ++q) {
            bool seen[8] = {};
            bool conflict = false;
            for (int i = 0; i < 8; ++i) {
                check_smem(e.addr[8 * q + i], 16, "ldmatrix: row misaligned or out of range");
                const int group = (e.addr[8 * q + i] % 128) / 16;
                conflict |= seen[group];
                seen[group] = true;
            }
            ++ldmatrix_count;
            conflict_count += conflict;
        }
    }
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
        unsigned lo, hi;
        if (!trans) {
            lo = smem_half(e.addr[8 * q + g] + 2 * (2 * t));
            hi = smem_half(e.addr[8 * q + g] + 2 * (2 * t + 1));
        } else {
            lo = smem_half(e.addr[8 * q + 2 * t] + 2 * g);
            hi = smem_half(e.addr[8 * q + 2 * t + 1] + 2 * g);
        }
        out[q] = lo | (hi << 16);
    }
}

void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
    unsigned r[4];
    ldmatrix_model(false, r, addr);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
    unsigned r[4];
    ldmatrix_model(true, r, addr);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}

static float half_table[65536];  // every float16 bit pattern as a float

static void fill_half_table() {
    for (unsigned bits = 0; bits < 65536; ++bits) {
        __half_raw raw;
        raw.x = static_cast<unsigned short>(bits);
        half_table[bits] = __half2float(__half(raw));
    }
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, lane = 4g + t:
//   A: a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B: b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C/D: c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g+8, 2t), (g+8, 2t+1)
// (in each 32-bit register the lower column / row index is the low half)
// A bfloat16 is the upper half of a float32.
static float bf16_value(unsigned bits) {
    const unsigned word = (bits & 0xffffu) << 16;
    float f;
    std::memcpy(&f, &word, 4);
    return f;
}
static float half_value(unsigned bits) { return half_table[bits & 0xffffu]; }

static float a_element(const Exchange& e, int row, int col, float (*value)(unsigned)) {
    const unsigned reg = e.a[4 * (row % 8) + (col % 8) / 2][row / 8 + 2 * (col / 8)];
    return value(reg >> (16 * (col % 2)));
}
static float b_element(const Exchange& e, int k, int n, float (*value)(unsigned)) {
    const unsigned reg = e.b[4 * n + (k % 8) / 2][k / 8];
    return value(reg >> (16 * (k % 2)));
}

// Both element types share the model: the fragments are the same, only the decoding differs.
static void mma_model(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                      float (*value)(unsigned)) {
    const int lane = current % 32;
    Exchange& mine = slot();
    for (int i = 0; i < 4; ++i) mine.a[lane][i] = a[i];
    for (int i = 0; i < 2; ++i) mine.b[lane][i] = b[i];
    const Exchange& e = post(MMA);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {  // d[i] is (row g + 8 * (i / 2), column 2t + i % 2)
        const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
        float sum = d[i];
        for (int k = 0; k < 16; ++k) {
            sum += a_element(e, row, k, value) * b_element(e, k, col, value);
        }
        d[i] = sum;
    }
}

void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    mma_model(d, a, b, half_value);
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: the same fragments, bfloat16 pairs.
void mma_16816_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    mma_model(d, a, b, bf16_value);
}

#include "gemm_fp16.cu"

// ---- running a grid ----------------------------------------------------------------------

static void fiber_entry() {
    kernel_body();
    fibers[current].done = true;
}

static void run_grid(int blocks, int batches) {
    smem.assign(STAGES * STAGE_BYTES, 0);
    for (int block = 0; block < blocks * batches; ++block) {
        blockIdx = {static_cast<unsigned>(block % blocks), static_cast<unsigned>(block / blocks),
                    0};
        std::fill(smem.begin(), smem.end(), 0xff);  // float16 NaN: stale reads show up
        for (int t = 0; t < kThreads; ++t) {
            Fiber& f = fibers[t];
            f.done = false;
            getcontext(&f.context);
            f.context.uc_stack.ss_sp = f.stack.data();
            f.context.uc_stack.ss_size = f.stack.size();
            f.context.uc_link = &scheduler;
            makecontext(&f.context, fiber_entry, 0);
        }
        current = kThreads - 1;  // so that LATE starts at thread 0
        for (int next; (next = next_runnable()) >= 0;) {
            current = next;
            threadIdx = {static_cast<unsigned>(next), 0, 0};
            swapcontext(&scheduler, &fibers[next].context);  // back when one ends or all wait
        }
        for (const Fiber& f : fibers) check(f.done, "deadlock: threads wait at different barriers");
        for (const Fiber& f : fibers) {
            bool idle = f.uncommitted.empty();
            for (const auto& group : f.groups) idle &= group.empty();
            check(idle, "a cp.async was still in flight when the kernel returned");
        }
    }
}

// ---- buffers that end right before an inaccessible page --------------------------------

static unsigned char* guarded(size_t bytes, size_t lead) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t span = (lead + bytes + 15) / 16 * 16;  // start stays 16-byte aligned + lead
    const size_t pages = (span + page - 1) / page + 1;
    void* base = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(base != MAP_FAILED, "mmap failed");
    unsigned char* guard = static_cast<unsigned char*>(base) + (pages - 1) * page;
    check(mprotect(guard, page, PROT_NONE) == 0, "mprotect failed");
    unsigned char* start = guard - span;
    std::memset(start, 0xff, span);  // NaN in the slack
    return start + lead;
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

static unsigned char* load(const char* path, size_t lead, size_t* bytes) {
    const std::vector<unsigned char> data = read_file(path);
    unsigned char* p = guarded(data.size(), lead);
    std::memcpy(p, data.data(), data.size());
    *bytes = data.size();
    return p;
}

template <bool TA, bool TB, typename OutT, typename InT = __half>
static void launch(int argc, char** argv) {
    const int M = std::atoi(argv[4]), N = std::atoi(argv[5]), K = std::atoi(argv[6]);
    const int lda = std::atoi(argv[7]), ldb = std::atoi(argv[8]), ldc = std::atoi(argv[9]);
    const float alpha = std::strtof(argv[10], nullptr), beta = std::strtof(argv[11], nullptr);
    const int flags = std::atoi(argv[12]);
    const bool misalign = std::atoi(argv[13]) != 0;
    mode = std::string(argv[14]) == "late" ? LATE : EARLY;
    size_t a_bytes, b_bytes, c_bytes, bias_bytes = 0;
    const auto* A = reinterpret_cast<const InT*>(load(argv[15], misalign ? 2 : 0, &a_bytes));
    const auto* B = reinterpret_cast<const InT*>(load(argv[16], misalign ? 2 : 0, &b_bytes));
    auto* C = reinterpret_cast<OutT*>(load(argv[17], misalign ? sizeof(OutT) : 0, &c_bytes));
    const OutT* bias = C;  // never read unless flags say so
    if (std::string(argv[18]) != "-")
        bias = reinterpret_cast<const OutT*>(load(argv[18], 0, &bias_bytes));
    readable = {{reinterpret_cast<const unsigned char*>(A),
                 reinterpret_cast<const unsigned char*>(A) + a_bytes},
                {reinterpret_cast<const unsigned char*>(B),
                 reinterpret_cast<const unsigned char*>(B) + b_bytes}};
    const bool batched = argc == 24;
    const int batches = batched ? std::atoi(argv[20]) : 1;
    const long long sa = batched ? std::atoll(argv[21]) : 0;
    const long long sb = batched ? std::atoll(argv[22]) : 0;
    const long long sc = batched ? std::atoll(argv[23]) : 0;
    kernel_body = [=] {
        if constexpr (std::is_same<InT, __nv_bfloat16>::value) {
            gemm_bf16<TA, TB, OutT>(A, B, C, bias, M, N, K, lda, ldb, ldc, alpha, beta, flags,
                                    sa, sb, sc);
        } else {
            gemm_f16<TA, TB, OutT>(A, B, C, bias, M, N, K, lda, ldb, ldc, alpha, beta, flags, sa,
                                   sb, sc);
        }
    };
    const int blocks = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    run_grid(blocks, batches);
    FILE* out = std::fopen(argv[19], "wb");
    check(out != nullptr && std::fwrite(C, 1, c_bytes, out) == c_bytes, "cannot write output");
    std::fclose(out);
    std::printf("ok blocks=%d ldmatrix=%lld conflicts=%lld\n", blocks, ldmatrix_count,
                conflict_count);
}

int main(int argc, char** argv) {
    if (argc != 20 && argc != 24) fail("usage: see the header of gemm_emulator.cpp");
    fill_half_table();
    const std::string layout = std::string(argv[1]) + argv[2] + argv[3];
    if (layout == "00f16") launch<false, false, __half>(argc, argv);
    else if (layout == "01f16") launch<false, true, __half>(argc, argv);
    else if (layout == "10f16") launch<true, false, __half>(argc, argv);
    else if (layout == "00f32") launch<false, false, float>(argc, argv);
    else if (layout == "01f32") launch<false, true, float>(argc, argv);
    else if (layout == "10f32") launch<true, false, float>(argc, argv);
    else if (layout == "00bf16") launch<false, false, __nv_bfloat16, __nv_bfloat16>(argc, argv);
    else if (layout == "01bf16") launch<false, true, __nv_bfloat16, __nv_bfloat16>(argc, argv);
    else if (layout == "10bf16") launch<true, false, __nv_bfloat16, __nv_bfloat16>(argc, argv);
    else if (layout == "00bf16f32") launch<false, false, float, __nv_bfloat16>(argc, argv);
    else if (layout == "01bf16f32") launch<false, true, float, __nv_bfloat16>(argc, argv);
    else if (layout == "10bf16f32") launch<true, false, float, __nv_bfloat16>(argc, argv);
    else fail("unknown layout: TA, TB in {00, 01, 10}, OUT in {f16, f32, bf16, bf16f32}");
    return 0;
}
