// bias_grad_emulator.cpp: run cuda/reduction.cu's bias_grad on a CPU, one fiber per CUDA
// thread.
//
// tests/test_bias_grad.py builds this as a shared library and hands it the launches that
// backend/bias_grad.py would send to the GPU, around NumPy arrays, so the launcher's grid and
// arguments (null pointers included), the column tiles, the row groups and the tree in shared
// memory are checked without a GPU, against a NumPy model of the kernel's order bit for bit.
// The kernel file is compiled unchanged; the hardware layer is in cuda_emulator.h, with
// -ftz=true's flushes (MXCSR's FTZ and DAZ) while a kernel runs, as on the GPU.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            bias_grad_emulator.cpp -o libbias_grad_emulator.so
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

template <typename G, typename B, typename P>
Body bias(void** a)
{
    return [=] {
        bias_grad<G, B, P>(arg<const G*>(a, 0), arg<const G*>(a, 1), arg<long long>(a, 2),
                           arg<long long>(a, 3), arg<B*>(a, 4), arg<P*>(a, 5));
    };
}

// Every name expression the launcher registers, spelled as it spells them.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
#define BIAS(G, B, P) {"bias_grad<" #G ", " #B ", " #P ">", &bias<G, B, P>}
    static const std::map<std::string, Body (*)(void**)> table = {
        BIAS(float, float, float),
        BIAS(float, float, __half),
        BIAS(float, float, __nv_bfloat16),
        BIAS(__half, __half, __half),
        BIAS(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16),
        BIAS(__half, float, __half),
        BIAS(__nv_bfloat16, float, __nv_bfloat16),
    };
#undef BIAS
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
