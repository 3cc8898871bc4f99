// cuda_emulator.h: CUDA's "hardware layer" on a CPU, for running a kernel file unchanged.
//
// Included by tests/optim_emulator.cpp (cuda/optim.cu), tests/amp_emulator.cpp (cuda/amp.cu)
// and tests/primitives_emulator.cpp (cuda/elementwise.cu, cuda/reduction.cu), which the tests build with g++ as shared libraries and feed the launches the
// Python launchers would send to a GPU. Modelled here:
//   * every block's threads run as fibers (ucontext) that meet at __syncthreads (and
//     __syncthreads_or); a thread that finishes while others wait at a barrier is reported
//     (a divergent barrier);
//   * blocks run one after another, in order;
//   * __shared__ variables are static (one copy per kernel, as per block: blocks do not
//     overlap), atomics are plain read-modify-writes, __threadfence does nothing;
//   * float arithmetic is IEEE single precision with no contraction (build with
//     -ffp-contract=off), as the loader's --fmad=false gives on the GPU; sqrtf and '/' are
//     correctly rounded. float <-> half conversions are cuda_fp16.h's own host code.

#pragma once

#include <cuda_fp16.h>
#include <pmmintrin.h>  // _MM_SET_DENORMALS_ZERO_MODE
#include <ucontext.h>
#include <vector_types.h>
#include <xmmintrin.h>  // _MM_SET_FLUSH_ZERO_MODE

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

struct Fiber {
    ucontext_t context;
    std::vector<char> stack = std::vector<char>(64 * 1024);
    bool done = false;
};

std::vector<Fiber> fibers;
ucontext_t scheduler;
int current = 0;
std::function<void()> body;
const char* error = nullptr;
int barrier_or = 0;      // the OR of the predicates of the threads at this barrier so far
int barrier_count = 0;   // how many threads have arrived
int barrier_result = 0;  // the OR of the last barrier every thread reached

void yield_to_scheduler() { swapcontext(&fibers[current].context, &scheduler); }

void entry()
{
    body();
    fibers[current].done = true;
    yield_to_scheduler();
}

// Run one block: every fiber until it finishes or waits at a barrier, round after round.
void run_block(int threads)
{
    fibers = std::vector<Fiber>(threads);
    for (auto& f : fibers) {
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.data();
        f.context.uc_stack.ss_size = f.stack.size();
        f.context.uc_link = nullptr;
        makecontext(&f.context, entry, 0);
    }
    for (;;) {
        int finished = 0;
        for (current = 0; current < threads; ++current) {
            if (fibers[current].done) {
                ++finished;
                continue;
            }
            threadIdx = {static_cast<unsigned>(current), 0, 0};
            swapcontext(&scheduler, &fibers[current].context);
            finished += fibers[current].done;
        }
        if (finished == threads) return;
        if (finished != 0) {
            error = "a thread returned while others wait at __syncthreads";
            return;
        }
    }
}

// Run the grid, block after block; 0 when it finished, 2 when a block reported an error.
int run_grid(std::function<void()> kernel_body, int grid, int block)
{
    error = nullptr;
    body = kernel_body;
    barrier_or = barrier_count = 0;
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    blockDim = {static_cast<unsigned>(block), 1, 1};
    for (int b = 0; b < grid && error == nullptr; ++b) {
        blockIdx = {static_cast<unsigned>(b), 0, 0};
        run_block(block);
    }
    return error == nullptr ? 0 : 2;
}

// run_grid under -ftz=true, as CuPy compiles every kernel: float32 subnormals flushed, in
// the results and in the operands (the fibers made in run_grid inherit this MXCSR).
int run_grid_ftz(std::function<void()> kernel_body, int grid, int block)
{
    const unsigned int before = _mm_getcsr();
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
    const int status = run_grid(kernel_body, grid, block);
    _mm_setcsr(before);
    return status;
}

}  // namespace emu

// Reinterpretations, as the device intrinsics do them.
inline unsigned int __float_as_uint(float x)
{
    unsigned int u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline long long __double_as_longlong(double x)
{
    long long u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

void __syncthreads() { emu::yield_to_scheduler(); }

// Every thread of the block arrives (one scheduling round) before any leaves: the last to
// arrive publishes the OR, which the others read when they resume.
int __syncthreads_or(int predicate)
{
    emu::barrier_or |= predicate != 0;
    if (++emu::barrier_count == static_cast<int>(blockDim.x)) {
        emu::barrier_result = emu::barrier_or;
        emu::barrier_or = emu::barrier_count = 0;
    }
    emu::yield_to_scheduler();
    return emu::barrier_result;
}

void __threadfence() {}
unsigned int atomicAdd(unsigned int* address, unsigned int value)
{
    const unsigned int old = *address;
    *address = old + value;
    return old;
}

template <typename T> T arg(void** args, int i) { return *static_cast<T*>(args[i]); }

// An emulator's launch(): find the kernel's name in its table (name -> a function making
// the kernel's body from the argument pointers) and run the grid under -ftz=true, as CuPy
// compiles every kernel; 1 for a name the table lacks.
template <typename Table>
int launch_from(const Table& table, const char* name, int grid, int block, void** args)
{
    const auto found = table.find(name);
    if (found == table.end()) {
        emu::error = "unknown kernel name";
        return 1;
    }
    return emu::run_grid_ftz(found->second(args), grid, block);
}

extern "C" const char* last_error() { return emu::error; }
