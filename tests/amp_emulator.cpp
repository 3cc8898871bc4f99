// amp_emulator.cpp: run cuda/amp.cu's unscale_and_check on a CPU, one fiber per CUDA thread.
//
// tests/test_amp_kernel_emulator.py builds this as a shared library and hands it the launches
// that backend/loss_scaling.py would send to the GPU (the very chunk table it packs, pointing
// at NumPy arrays), so the launcher, the table, the vector and scalar paths, the block-wide
// OR of the inf flag and the rounding of every element are checked against the NumPy twin,
// bit for bit, without a GPU. The kernel file is compiled unchanged; the hardware layer is in
// cuda_emulator.h, and the few device intrinsics amp.cu uses are modelled below.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda -I<repo>/tests
//            amp_emulator.cpp -o libamp_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

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
inline bool __isGlobal(const void*) { return true; }  // every pointer here is "global"
#define __builtin_assume(condition) static_cast<void>(0)

#include "amp.cu"

template <typename T>
std::function<void()> unscale(void** a)
{
    return [=] {
        unscale_and_check<T>(arg<const long long*>(a, 0), arg<int>(a, 1), arg<int>(a, 2),
                             arg<const float*>(a, 3), arg<bool*>(a, 4));
    };
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    const std::string full(name);
    std::function<void()> body;
    if (full == "unscale_and_check<__half>") body = unscale<__half>(args);
    if (full == "unscale_and_check<float>") body = unscale<float>(args);
    if (full == "unscale_and_check<double>") body = unscale<double>(args);
    if (!body) {
        emu::error = "unknown kernel name";
        return 1;
    }
    return emu::run_grid(body, grid, block);
}
