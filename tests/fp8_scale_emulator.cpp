// fp8_scale_emulator.cpp: run cuda/fp8_scale.cu's delayed-scaling update on a CPU, one fiber
// per CUDA thread.
//
// tests/test_fp8_scale_kernel.py builds this as a shared library and hands it the launches
// that backend/fp8_scale.py would send to the GPU (around NumPy arrays posing as CuPy ones),
// so the launcher's arguments, the block's maximum over the history (strides, tail, the tree
// in shared memory), the scale's arithmetic and the rotation are checked against the NumPy
// twin (amp/fp8/scaling.py's update_amax_history_and_scale) bit for bit without a GPU. The
// kernel file is compiled unchanged; the hardware layer is tests/cuda_emulator.h, which runs
// every launch under flush-to-zero (MXCSR's FTZ and DAZ), as CuPy compiles kernels with
// -ftz=true: float32 arithmetic on a subnormal amax or scale would go wrong here as there.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda -I<repo>/tests
//            fp8_scale_emulator.cpp -o libfp8_scale_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"
#include "double_rn.h"  // the device intrinsics fp8_scale.cu uses, as amp.cu's emulator's

#include <map>

#include "fp8_scale.cu"

std::function<void()> update(void** a)
{
    return [=] {
        fp8_delayed_scale_update(arg<float*>(a, 0), arg<float*>(a, 1), arg<float*>(a, 2),
                                 arg<float*>(a, 3), arg<float*>(a, 4), arg<int>(a, 5),
                                 arg<float>(a, 6), arg<int>(a, 7));
    };
}

const std::map<std::string, std::function<void()> (*)(void**)>& kernel_table()
{
    static const std::map<std::string, std::function<void()> (*)(void**)> table = {
        {"fp8_delayed_scale_update", &update},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
