// primitives_emulator.cpp: run cuda/elementwise.cu and cuda/reduction.cu on a CPU, one fiber
// per CUDA thread.
//
// tests/test_primitive_kernels.py builds this as a shared library and hands it the launches
// that backend/primitives.py (relu_backward, sum_squares) would send to the GPU (and
// tests/test_gelu_kernel.py those of backend/gelu.py), around NumPy
// arrays, so the launchers' grids and arguments, the grid-stride loop, the tiles, the block
// trees in shared memory and the one-block finish are checked without a GPU: relu_backward
// against its twin bit for bit, sum_squares against a NumPy model of its order bit for bit
// and against float64 within its error bound. The kernel files are compiled unchanged; the
// hardware layer is in cuda_emulator.h, and the few device intrinsics they use are below.
//
// Flush to zero. CuPy compiles every kernel with -ftz=true; launch() sets the x86 equivalents
// (MXCSR's FTZ and DAZ bits) while a kernel runs, as tests/amp_emulator.cpp does, so a kernel
// that lets a float32 subnormal reach float arithmetic loses it here as on the GPU. (They
// flush double subnormals too, which the GPU keeps: the tests give no double input below
// 2**-511, whose square would be one.)
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            primitives_emulator.cpp -o libprimitives_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cuda_bf16.h>

#include <cmath>
#include <map>

// (__float_as_uint and __double_as_longlong: cuda_emulator.h)
// One IEEE operation each, rounded to nearest even (built with -ffp-contract=off: no fma).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

#include "elementwise.cu"
#include "reduction.cu"

using Body = std::function<void()>;

template <typename T, typename G>
Body relu(void** a)
{
    return [=] {
        relu_backward<T, G>(arg<const T*>(a, 0), arg<const G*>(a, 1), arg<G*>(a, 2),
                            arg<long long>(a, 3));
    };
}

template <typename T>
Body gelu_fwd(void** a)
{
    return [=] { gelu_forward<T>(arg<const T*>(a, 0), arg<T*>(a, 1), arg<long long>(a, 2)); };
}

template <typename T>
Body gelu_bwd(void** a)
{
    return [=] {
        gelu_backward<T>(arg<const T*>(a, 0), arg<const T*>(a, 1), arg<T*>(a, 2),
                         arg<long long>(a, 3));
    };
}

template <typename T, typename Acc>
Body squares(void** a)
{
    return [=] {
        sum_squares<T, Acc>(arg<const T*>(a, 0), arg<long long>(a, 1), arg<Acc*>(a, 2),
                            arg<Acc*>(a, 3));
    };
}

template <typename Acc>
Body partials(void** a)
{
    return [=] { sum_partials<Acc>(arg<const Acc*>(a, 0), arg<long long>(a, 1), arg<Acc*>(a, 2)); };
}

template <typename T>
Body squares_tensors(void** a)
{
    return [=] {
        sum_squares_tensors<T>(arg<const long long*>(a, 0), arg<int>(a, 1), arg<float*>(a, 2));
    };
}

Body scale(void** a)
{
    return [=] {
        clip_scale(arg<const float*>(a, 0), arg<const long long*>(a, 1), arg<int>(a, 2),
                   arg<float>(a, 3), arg<float*>(a, 4));
    };
}

template <typename T>
Body scaled_tensors(void** a)
{
    return [=] {
        scale_tensors<T>(arg<const long long*>(a, 0), arg<int>(a, 1), arg<const float*>(a, 2));
    };
}

// Every name expression the launchers register, spelled as they spell it.
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
#define RELU(T, G) {"relu_backward<" #T ", " #G ">", &relu<T, G>}
#define RELU_FOR_Y(T) RELU(T, __half), RELU(T, __nv_bfloat16), RELU(T, float), RELU(T, double)
#define SQUARES(T, Acc) {"sum_squares<" #T ", " #Acc ">", &squares<T, Acc>}
#define SQUARES_INTO(Acc) \
    SQUARES(__half, Acc), SQUARES(__nv_bfloat16, Acc), SQUARES(float, Acc), SQUARES(double, Acc)
    static const std::map<std::string, Body (*)(void**)> table = {
        RELU_FOR_Y(__half),
        RELU_FOR_Y(__nv_bfloat16),
        RELU_FOR_Y(float),
        RELU_FOR_Y(double),
        {"gelu_forward<__half>", &gelu_fwd<__half>},
        {"gelu_forward<__nv_bfloat16>", &gelu_fwd<__nv_bfloat16>},
        {"gelu_forward<float>", &gelu_fwd<float>},
        {"gelu_backward<__half>", &gelu_bwd<__half>},
        {"gelu_backward<__nv_bfloat16>", &gelu_bwd<__nv_bfloat16>},
        {"gelu_backward<float>", &gelu_bwd<float>},
        SQUARES_INTO(float),
        SQUARES_INTO(double),
        {"sum_partials<float>", &partials<float>},
        {"sum_partials<double>", &partials<double>},
        {"sum_squares_tensors<__half>", &squares_tensors<__half>},
        {"sum_squares_tensors<__nv_bfloat16>", &squares_tensors<__nv_bfloat16>},
        {"sum_squares_tensors<float>", &squares_tensors<float>},
        {"clip_scale", &scale},
        {"scale_tensors<__half>", &scaled_tensors<__half>},
        {"scale_tensors<__nv_bfloat16>", &scaled_tensors<__nv_bfloat16>},
        {"scale_tensors<float>", &scaled_tensors<float>},
    };
#undef SQUARES_INTO
#undef SQUARES
#undef RELU_FOR_Y
#undef RELU
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
