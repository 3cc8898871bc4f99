// layer_norm_emulator.cpp: run cuda/layer_norm.cu's three kernels on a CPU, one fiber per
// CUDA thread.
//
// tests/test_layer_norm_kernel.py builds this as a shared library and hands it the launches
// that backend/layer_norm.py would send to the GPU, around NumPy arrays, so the launcher's
// grids and arguments, the row and column loops, the trees in shared memory and the barriers
// are checked without a GPU. The kernel file is compiled unchanged; the hardware layer is in
// cuda_emulator.h, with -ftz's flushes (MXCSR's FTZ and DAZ) while a kernel runs, as on the
// GPU.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            layer_norm_emulator.cpp -o liblayer_norm_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cmath>
#include <map>

// One IEEE operation each, rounded to nearest even (built with -ffp-contract=off: no fma).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

#include "layer_norm.cu"

using Body = std::function<void()>;

Body forward(void** a)
{
    return [=] {
        layer_norm_forward(arg<const float*>(a, 0), arg<const float*>(a, 1),
                           arg<const float*>(a, 2), arg<float*>(a, 3), arg<float*>(a, 4),
                           arg<float*>(a, 5), arg<int>(a, 6), arg<int>(a, 7), arg<float>(a, 8),
                           arg<int>(a, 9));
    };
}

Body backward_input(void** a)
{
    return [=] {
        layer_norm_backward_input(arg<const float*>(a, 0), arg<const float*>(a, 1),
                                  arg<const float*>(a, 2), arg<const float*>(a, 3),
                                  arg<const float*>(a, 4), arg<float*>(a, 5), arg<int>(a, 6),
                                  arg<int>(a, 7), arg<int>(a, 8));
    };
}

Body backward_params(void** a)
{
    return [=] {
        layer_norm_backward_params(arg<const float*>(a, 0), arg<const float*>(a, 1),
                                   arg<const float*>(a, 2), arg<const float*>(a, 3),
                                   arg<float*>(a, 4), arg<float*>(a, 5), arg<int>(a, 6),
                                   arg<int>(a, 7), arg<int>(a, 8));
    };
}

// Every name the launcher uses.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
    static const std::map<std::string, Body (*)(void**)> table = {
        {"layer_norm_forward", &forward},
        {"layer_norm_backward_input", &backward_input},
        {"layer_norm_backward_params", &backward_params},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
