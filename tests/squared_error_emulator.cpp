// squared_error_emulator.cpp: run cuda/reduction.cu's squared_error, mean_partials and
// sum_partials (mse_loss's forward) and squared_error_backward on a CPU, one fiber per CUDA
// thread.
//
// tests/test_squared_error.py builds this as a shared library and hands it the launches that
// backend/squared_error.py would send to the GPU, around NumPy arrays, so the launcher's grids
// and arguments, the tiles, the trees in shared memory, the one-block finish and the division
// are checked without a GPU, against a NumPy model of the kernels' order bit for bit. The
// kernel file is compiled unchanged; the hardware layer is in cuda_emulator.h, with -ftz's
// flushes (MXCSR's FTZ and DAZ) while a kernel runs, as on the GPU. (They flush double
// subnormals too, which the GPU keeps: the tests give no double mean below 2**-1022.)
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            squared_error_emulator.cpp -o libsquared_error_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cuda_bf16.h>

#include <map>

// One IEEE operation each, rounded to nearest even (built with -ffp-contract=off: no fma).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fdiv_rn(float a, float b) { return a / b; }  // (reduction.cu's clip_scale)
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

#include "reduction.cu"

using Body = std::function<void()>;

template <typename Acc>
Body forward(void** a)
{
    return [=] {
        squared_error<Acc>(arg<const Acc*>(a, 0), arg<const Acc*>(a, 1), arg<long long>(a, 2),
                           arg<int>(a, 3), arg<Acc*>(a, 4), arg<Acc*>(a, 5), arg<Acc*>(a, 6));
    };
}

template <typename Acc>
Body mean(void** a)
{
    return [=] {
        mean_partials<Acc>(arg<const Acc*>(a, 0), arg<long long>(a, 1), arg<long long>(a, 2),
                           arg<Acc*>(a, 3));
    };
}

template <typename Acc>
Body sum(void** a)
{
    return [=] { sum_partials<Acc>(arg<const Acc*>(a, 0), arg<long long>(a, 1), arg<Acc*>(a, 2)); };
}

template <typename Acc>
Body backward(void** a)
{
    return [=] {
        squared_error_backward<Acc>(arg<const Acc*>(a, 0), arg<const Acc*>(a, 1),
                                    arg<Acc>(a, 2), arg<long long>(a, 3), arg<Acc*>(a, 4));
    };
}

// Every name expression the launcher uses, spelled as it spells them.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
    static const std::map<std::string, Body (*)(void**)> table = {
        {"squared_error<float>", &forward<float>},
        {"squared_error<double>", &forward<double>},
        {"mean_partials<float>", &mean<float>},
        {"mean_partials<double>", &mean<double>},
        {"sum_partials<float>", &sum<float>},
        {"sum_partials<double>", &sum<double>},
        {"squared_error_backward<float>", &backward<float>},
        {"squared_error_backward<double>", &backward<double>},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
