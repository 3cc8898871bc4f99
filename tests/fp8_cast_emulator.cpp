// fp8_cast_emulator.cpp: run cuda/fp8_cast.cu's kernels on a CPU, one fiber per CUDA thread.
//
// tests/test_fp8_cast_kernel.py builds this as a shared library and hands it the launches that
// backend/fp8_kernels.py would send to the GPU (around NumPy arrays posing as CuPy ones), so
// the launcher, the 4-element vector path and its scalar tail, the tiled transpose, the
// block-wide amax and its atomicMax, and the rounding of every element are checked against
// ml_dtypes bit for bit without a GPU. The kernel file is compiled unchanged; the hardware
// layer is tests/cuda_emulator.h, plus the atomicMax and float reinterpretation modelled below.
// Launches run under flush-to-zero, as CuPy compiles every kernel with -ftz=true.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda -I<repo>/tests
//            fp8_cast_emulator.cpp -o libfp8_cast_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include <cuda_bf16.h>

#include "cuda_emulator.h"
#include "double_rn.h"  // for the delayed-scaling update (fp8_scale.cu, which fp8_cast.cu includes)

// (__float_as_uint, atomicAdd, __threadfence: cuda_emulator.h.) Atomics are plain
// read-modify-writes: blocks run one after another, so the last to count is the last block.
unsigned int atomicMax(unsigned int* address, unsigned int value)
{
    const unsigned int old = *address;
    if (value > old) *address = value;
    return old;
}

#include "fp8_cast.cu"

template <typename In>
std::function<void()> cast(void** a)
{
    return [=] {
        cast_fp8_amax<In>(arg<const In*>(a, 0), arg<float*>(a, 1), arg<unsigned char*>(a, 2),
                          arg<unsigned*>(a, 3), arg<long long>(a, 4), arg<int>(a, 5),
                          arg<int>(a, 6), arg<float*>(a, 7), arg<float*>(a, 8),
                          arg<float*>(a, 9), arg<unsigned*>(a, 10), arg<int>(a, 11),
                          arg<float>(a, 12), arg<int>(a, 13));
    };
}

template <typename In>
std::function<void()> cast_transpose(void** a)
{
    return [=] {
        cast_transpose_fp8_amax<In>(arg<const In*>(a, 0), arg<float*>(a, 1),
                                    arg<unsigned char*>(a, 2), arg<unsigned char*>(a, 3),
                                    arg<unsigned*>(a, 4), arg<int>(a, 5), arg<int>(a, 6),
                                    arg<int>(a, 7), arg<int>(a, 8), arg<float*>(a, 9),
                                    arg<float*>(a, 10), arg<float*>(a, 11),
                                    arg<unsigned*>(a, 12), arg<int>(a, 13), arg<float>(a, 14),
                                    arg<int>(a, 15));
    };
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    const std::string full(name);
    std::function<void()> body;
    if (full == "cast_fp8_amax<float>") body = cast<float>(args);
    if (full == "cast_fp8_amax<__half>") body = cast<__half>(args);
    if (full == "cast_fp8_amax<__nv_bfloat16>") body = cast<__nv_bfloat16>(args);
    if (full == "cast_transpose_fp8_amax<float>") body = cast_transpose<float>(args);
    if (full == "cast_transpose_fp8_amax<__half>") body = cast_transpose<__half>(args);
    if (full == "cast_transpose_fp8_amax<__nv_bfloat16>") {
        body = cast_transpose<__nv_bfloat16>(args);
    }
    if (!body) {
        emu::error = "unknown kernel name";
        return 1;
    }
    return emu::run_grid_ftz(body, grid, block);  // -ftz=true, as CuPy compiles it
}
