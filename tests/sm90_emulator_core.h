// sm90_emulator_core.h: what the Hopper GEMM emulators share (gemm_sm90_emulator.cpp and
// fp8_gemm_emulator.cpp): one cooperative fiber per CUDA thread, the "early" and "late"
// schedules, block and warpgroup barriers, shared memory starting 16 bytes past a 1024-byte
// boundary, and the mbarrier model (init, arrive, expect_tx, complete_tx, try_wait.parity).
//
// The including file defines, before including this:
//   SM90_EMULATOR_NAME   its name, for error messages;
//   struct WgmmaOp       one queued wgmma (its own operand fields).
// and afterwards declares the TensorMap the kernel file defines, the TMA and wgmma models,
// and includes the kernel file. See gemm_sm90_emulator.cpp's header for the models.

#pragma once

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <vector>

[[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "%s: %s\n", SM90_EMULATOR_NAME, what);
    std::exit(2);
}
static void check(bool ok, const char* what) {
    if (!ok) fail(what);
}

// ---- fibers ------------------------------------------------------------------------------

constexpr int kThreads = 384;
constexpr size_t kStackBytes = 128 * 1024;
constexpr unsigned kSmemBase = 16;  // shared addresses start here: not 1024-aligned

struct Fiber {
    ucontext_t context;
    std::vector<char> stack = std::vector<char>(kStackBytes);
    bool done = false;
    std::function<bool()> waiting;  // empty: runnable
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

// Block the current thread until `ready()` holds (other threads run meanwhile).
static void wait_until(std::function<bool()> ready) {
    if (ready()) {
        if (mode == LATE) {  // still give the others a turn
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

// A barrier of `size` threads (the block, or one warpgroup).
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

// ---- warps, atomics, fences (the split-K epilogue's count) -------------------------------
// Blocks run one after another and fibers one at a time: an atomic is a plain
// read-modify-write, a fence does nothing, and an L2 load (__ldcg) is a load.
static Barrier warp_barrier[kThreads / 32];
static unsigned warp_slot[kThreads / 32];
void __syncwarp() { warp_barrier[current / 32].arrive_and_wait(32); }
unsigned __shfl_sync(unsigned, unsigned value, int source_lane) {  // every lane: the source's
    const int warp = current / 32;
    if (current % 32 == source_lane) warp_slot[warp] = value;
    warp_barrier[warp].arrive_and_wait(32);
    const unsigned result = warp_slot[warp];
    warp_barrier[warp].arrive_and_wait(32);
    return result;
}
void __threadfence() {}
unsigned atomicAdd(unsigned* address, unsigned value) {
    const unsigned old = *address;
    *address = old + value;
    return old;
}
// The split-K workspace starts filled with this NaN: reading it back means adding up a
// split's sums before that split stored them (the emulator runs CTAs in order, so a wrong
// count could otherwise still end with the right result, written by the last split).
static constexpr unsigned kUnwritten = 0x7fc0deadu;
float __ldcg(const float* address) {
    unsigned bits;
    std::memcpy(&bits, address, sizeof bits);
    check(bits != kUnwritten, "split-K: a partial sum read before its split stored it");
    return *address;
}

// ---- shared memory, mbarriers, TMA --------------------------------------------------------

static std::vector<unsigned char> smem;
static long long tma_count = 0, wgmma_count = 0;

float __fmul_rn(float a, float b) { return a * b; }  // built with -ffp-contract=off
float __fadd_rn(float a, float b) { return a + b; }

unsigned char* dynamic_smem() { return smem.data(); }
unsigned smem_address(const void* p) {
    return kSmemBase +
           static_cast<unsigned>(static_cast<const unsigned char*>(p) - smem.data());
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
