// softmax_emulator.cpp: run cuda/softmax.cu's two kernels on a CPU, one fiber per CUDA thread.
//
// tests/test_softmax_kernel.py builds this as a shared library and hands it the launches that
// backend/softmax.py would send to the GPU, around NumPy arrays, so the launcher's grids and
// arguments, the row loop, the trees in shared memory and the barriers are checked without a
// GPU. The kernel file is compiled unchanged; the hardware layer is in cuda_emulator.h, with
// -ftz's flushes (MXCSR's FTZ and DAZ) while a kernel runs, as on the GPU.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            softmax_emulator.cpp -o libsoftmax_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cmath>
#include <cstring>
#include <map>

#include "float_rn.h"  // __fadd_rn, __fsub_rn, __fmul_rn, __fdiv_rn, __int_as_float

#include "softmax.cu"

using Body = std::function<void()>;

template <typename T>
Body forward(void** a)
{
    return [=] {
        softmax_forward<T>(arg<const T*>(a, 0), arg<float*>(a, 1), arg<T*>(a, 2), arg<int>(a, 3),
                           arg<int>(a, 4));
    };
}

template <typename T>
Body backward(void** a)
{
    return [=] {
        softmax_backward<T>(arg<const float*>(a, 0), arg<const T*>(a, 1), arg<T*>(a, 2),
                            arg<int>(a, 3), arg<int>(a, 4));
    };
}

// Every name the launcher uses.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
    static const std::map<std::string, Body (*)(void**)> table = {
        {"softmax_forward<float>", &forward<float>},
        {"softmax_forward<__half>", &forward<__half>},
        {"softmax_forward<__nv_bfloat16>", &forward<__nv_bfloat16>},
        {"softmax_backward<float>", &backward<float>},
        {"softmax_backward<__half>", &backward<__half>},
        {"softmax_backward<__nv_bfloat16>", &backward<__nv_bfloat16>},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
