// cross_entropy_emulator.cpp: run cuda/cross_entropy.cu's kernels on a CPU, one fiber per CUDA
// thread.
//
// tests/test_cross_entropy_kernel.py builds this as a shared library and hands it the launches
// that backend/cross_entropy.py would send to the GPU, around NumPy arrays, so the launcher's
// grids and arguments, the row loop, the trees in shared memory, the barriers and the label
// flag are checked without a GPU. The kernel file is compiled unchanged; the hardware layer is
// in cuda_emulator.h, with -ftz's flushes (MXCSR's FTZ and DAZ) while a kernel runs, as on the
// GPU. expf and logf are the C library's (CUDA's are within 2 and 1 ulp of them).
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            cross_entropy_emulator.cpp -o libcross_entropy_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cmath>
#include <cstring>
#include <map>

#include "float_rn.h"  // __fadd_rn, __fsub_rn, __fmul_rn, __fdiv_rn, __int_as_float

#include "cross_entropy.cu"

using Body = std::function<void()>;

template <typename T, typename L>
Body forward(void** a)
{
    return [=] {
        cross_entropy_forward<T, L>(arg<const T*>(a, 0), arg<const L*>(a, 1),
                                    arg<const float*>(a, 2), arg<long long>(a, 3),
                                    arg<float*>(a, 4), arg<float*>(a, 5), arg<float*>(a, 6),
                                    arg<float*>(a, 7), arg<bool*>(a, 8), arg<int>(a, 9),
                                    arg<int>(a, 10));
    };
}

template <typename T>
Body reduce(void** a)
{
    return [=] {
        cross_entropy_reduce<T>(arg<const float*>(a, 0), arg<const float*>(a, 1), arg<int>(a, 2),
                                arg<int>(a, 3), arg<float*>(a, 4), arg<T*>(a, 5));
    };
}

template <typename T, typename L>
Body backward(void** a)
{
    return [=] {
        cross_entropy_backward<T, L>(arg<const T*>(a, 0), arg<const L*>(a, 1),
                                     arg<long long>(a, 2), arg<const float*>(a, 3),
                                     arg<const float*>(a, 4), arg<const float*>(a, 5),
                                     arg<const float*>(a, 6), arg<int>(a, 7),
                                     arg<const float*>(a, 8), arg<T*>(a, 9), arg<int>(a, 10),
                                     arg<int>(a, 11));
    };
}

#define MINITORCH_ENTRIES(T, L, NAME)                                              \
    {"cross_entropy_forward<" #T ", " NAME ">", &forward<T, L>},                  \
        {"cross_entropy_backward<" #T ", " NAME ">", &backward<T, L>},

// Every name the launcher uses.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
    static const std::map<std::string, Body (*)(void**)> table = {
        MINITORCH_ENTRIES(float, long long, "long long")
        MINITORCH_ENTRIES(float, int, "int")
        MINITORCH_ENTRIES(__half, long long, "long long")
        MINITORCH_ENTRIES(__half, int, "int")
        MINITORCH_ENTRIES(__nv_bfloat16, long long, "long long")
        MINITORCH_ENTRIES(__nv_bfloat16, int, "int")
        {"cross_entropy_reduce<float>", &reduce<float>},
        {"cross_entropy_reduce<__half>", &reduce<__half>},
        {"cross_entropy_reduce<__nv_bfloat16>", &reduce<__nv_bfloat16>},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
