// optim_emulator.cpp: run cuda/optim.cu on a CPU, one cooperative fiber per CUDA thread.
//
// tests/test_fused_optim.py builds this as a shared library and hands it the launches that
// backend/fused_optim.py would send to the GPU (the very table it packs, pointing at NumPy
// arrays), so the launcher, the table layout and the kernels' arithmetic are checked against
// the NumPy twin, bit for bit, on machines without a GPU. The kernel file is compiled
// unchanged; only CUDA's "hardware layer" is modelled here:
//   * every block's threads run as fibers (ucontext) that meet at __syncthreads; a thread
//     that finishes while others wait at a barrier is reported (a divergent barrier);
//   * blocks run one after another, in order, so the last one to take an Adam ticket is the
//     last block of the grid; the test checks the beta pows advanced exactly once;
//   * __shared__ variables are static (one copy per kernel, as per block: blocks do not
//     overlap), atomics are plain read-modify-writes, __threadfence does nothing;
//   * float arithmetic is IEEE single precision with no contraction (-ffp-contract=off),
//     as the loader's --fmad=false gives on the GPU; sqrtf and '/' are correctly rounded.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda optim_emulator.cpp
//            -o liboptim_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include <cuda_fp16.h>
#include <ucontext.h>
#include <vector_types.h>

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

}  // namespace emu

void __syncthreads() { emu::yield_to_scheduler(); }
void __threadfence() {}
unsigned int atomicAdd(unsigned int* address, unsigned int value)
{
    const unsigned int old = *address;
    *address = old + value;
    return old;
}

#include "optim.cu"

template <typename T> T arg(void** args, int i) { return *static_cast<T*>(args[i]); }

template <typename T, typename G>
std::function<void()> kernel(const std::string& kind, void** a)
{
    using Tensors = const TensorArgs*;
    using Chunks = const int2*;
    using Flag = const bool*;
    using Lr = const double*;
    if (kind == "sgd")
        return [=] {
            sgd_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<Flag>(a, 2), arg<Lr>(a, 3));
        };
    if (kind == "momentum")
        return [=] {
            momentum_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<Flag>(a, 2),
                                arg<Lr>(a, 3), arg<float>(a, 4), arg<int>(a, 5));
        };
    if (kind == "adam")
        return [=] {
            adam_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<int>(a, 2),
                            arg<unsigned int*>(a, 3), arg<Flag>(a, 4), arg<Lr>(a, 5),
                            arg<float>(a, 6), arg<float>(a, 7), arg<float>(a, 8),
                            arg<float>(a, 9), arg<float>(a, 10));
        };
    return nullptr;
}

extern "C" const char* last_error() { return emu::error; }

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    const std::string full(name);
    const std::string kind = full.substr(0, full.find("_step<"));
    const std::string types = full.substr(full.find('<'));
    std::function<void()> body;
    if (types == "<__half, __half>") body = kernel<__half, __half>(kind, args);
    if (types == "<__half, float>") body = kernel<__half, float>(kind, args);
    if (types == "<__nv_bfloat16, __nv_bfloat16>") {
        body = kernel<__nv_bfloat16, __nv_bfloat16>(kind, args);
    }
    if (types == "<__nv_bfloat16, float>") body = kernel<__nv_bfloat16, float>(kind, args);
    if (types == "<float, float>") body = kernel<float, float>(kind, args);
    if (!body) {
        emu::error = "unknown kernel name";
        return 1;
    }
    emu::error = nullptr;
    emu::body = body;
    gridDim = {static_cast<unsigned>(grid), 1, 1};
    blockDim = {static_cast<unsigned>(block), 1, 1};
    for (int b = 0; b < grid && emu::error == nullptr; ++b) {
        blockIdx = {static_cast<unsigned>(b), 0, 0};
        emu::run_block(block);
    }
    return emu::error == nullptr ? 0 : 2;
}
