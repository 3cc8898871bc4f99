// amp_emulator.cpp: run cuda/amp.cu's kernels on a CPU, one fiber per CUDA thread.
//
// tests/test_amp_kernel_emulator.py builds this as a shared library and hands it the launches
// that backend/loss_scaling.py would send to the GPU (for unscale_and_check, the very chunk
// table it packs, pointing at NumPy arrays), so the launcher, the table, the vector and
// scalar paths, the block-wide OR of the inf flag, the rounding of every element, the
// inverse of the scale and the one-thread update are checked against the NumPy twins, bit
// for bit, without a GPU. The kernel file is compiled unchanged; the hardware layer is in
// cuda_emulator.h, and the few device intrinsics amp.cu uses are modelled below.
//
// Flush to zero. CuPy compiles every kernel with -ftz=true: on the GPU, float32 arithmetic,
// comparisons and float <-> double conversions read and write subnormals as zero. launch()
// sets the x86 equivalents (MXCSR's FTZ and DAZ bits) while a kernel runs, so a kernel that
// lets a float32 subnormal reach float arithmetic fails here as it would on the GPU. (They
// also flush double subnormals, which the GPU keeps; amp.cu makes none: its doubles stay
// above 2**-298.)
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda -I<repo>/tests
//            amp_emulator.cpp -o libamp_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"
#include "double_rn.h"

// (__uint_as_float, __double2hiint, __double2uint_rn: double_rn.h) double -> unsigned int,
// rounded toward zero:
inline unsigned int __double2uint_rz(double x) { return static_cast<unsigned int>(x); }
inline bool __isGlobal(const void*) { return true; }  // every pointer here is "global"
#define __builtin_assume(condition) static_cast<void>(0)

inline float __fmul_rn(float a, float b) { return a * b; }  // (scale_loss; no fma here)

#include "amp.cu"

template <typename T>
std::function<void()> unscale(void** a)
{
    return [=] {
        unscale_and_check<T>(arg<const long long*>(a, 0), arg<int>(a, 1), arg<int>(a, 2),
                             arg<const float*>(a, 3), arg<bool*>(a, 4));
    };
}

std::function<void()> inverse(void** a)
{
    return [=] { inverse_scale(arg<const float*>(a, 0), arg<float*>(a, 1)); };
}

std::function<void()> inverse_and_clear(void** a)
{
    return [=] {
        inverse_scale_and_clear(arg<const float*>(a, 0), arg<float*>(a, 1), arg<bool*>(a, 2));
    };
}

std::function<void()> scale(void** a)
{
    return [=] {
        scale_loss(arg<const float*>(a, 0), arg<const float*>(a, 1), arg<float*>(a, 2),
                   arg<float*>(a, 3));
    };
}

std::function<void()> update(void** a)
{
    return [=] {
        update_loss_scaling(arg<const bool*>(a, 0), arg<float*>(a, 1), arg<int*>(a, 2),
                            arg<int*>(a, 3), arg<int*>(a, 4), arg<long long>(a, 5),
                            arg<long long>(a, 6), arg<float>(a, 7), arg<float>(a, 8),
                            arg<float>(a, 9), arg<float>(a, 10));
    };
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    const std::string full(name);
    std::function<void()> body;
    if (full == "unscale_and_check<__half>") body = unscale<__half>(args);
    if (full == "unscale_and_check<float>") body = unscale<float>(args);
    if (full == "unscale_and_check<double>") body = unscale<double>(args);
    if (full == "inverse_scale") body = inverse(args);
    if (full == "inverse_scale_and_clear") body = inverse_and_clear(args);
    if (full == "update_loss_scaling") body = update(args);
    if (full == "scale_loss") body = scale(args);
    if (!body) {
        emu::error = "unknown kernel name";
        return 1;
    }
    return emu::run_grid_ftz(body, grid, block);  // -ftz=true, as CuPy compiles it
}
