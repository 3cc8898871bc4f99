// optim_emulator.cpp: run cuda/optim.cu on a CPU, one cooperative fiber per CUDA thread.
//
// tests/test_fused_optim.py builds this as a shared library and hands it the launches that
// backend/fused_optim.py would send to the GPU (the very table it packs, pointing at NumPy
// arrays), so the launcher, the table layout and the kernels' arithmetic are checked against
// the NumPy twin, bit for bit, on machines without a GPU. The kernel file is compiled
// unchanged; CUDA's "hardware layer" is modelled in cuda_emulator.h (fibers per thread,
// blocks in order, IEEE float without contraction). Blocks run in order, so the last one to
// take an Adam ticket is the last block of the grid; the test checks the beta pows advanced
// exactly once.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda optim_emulator.cpp
//            -o liboptim_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include "optim.cu"

template <typename T, typename G>
std::function<void()> kernel(const std::string& kind, void** a)
{
    using Tensors = const TensorArgs*;
    using Chunks = const int2*;
    using Flag = const bool*;
    using Lr = const double*;
    if (kind == "sgd")
        return [=] {
            sgd_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<Flag>(a, 2), arg<Lr>(a, 3));
        };
    if (kind == "momentum")
        return [=] {
            momentum_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<Flag>(a, 2),
                                arg<Lr>(a, 3), arg<float>(a, 4), arg<int>(a, 5));
        };
    if (kind == "adam")
        return [=] {
            adam_step<T, G>(arg<Tensors>(a, 0), arg<Chunks>(a, 1), arg<int>(a, 2),
                            arg<unsigned int*>(a, 3), arg<Flag>(a, 4), arg<Lr>(a, 5),
                            arg<float>(a, 6), arg<float>(a, 7), arg<float>(a, 8),
                            arg<float>(a, 9), arg<float>(a, 10));
        };
    return nullptr;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    const std::string full(name);
    const std::string kind = full.substr(0, full.find("_step<"));
    const std::string types = full.substr(full.find('<'));
    std::function<void()> body;
    if (types == "<__half, __half>") body = kernel<__half, __half>(kind, args);
    if (types == "<__half, float>") body = kernel<__half, float>(kind, args);
    if (types == "<__nv_bfloat16, __nv_bfloat16>") {
        body = kernel<__nv_bfloat16, __nv_bfloat16>(kind, args);
    }
    if (types == "<__nv_bfloat16, float>") body = kernel<__nv_bfloat16, float>(kind, args);
    if (types == "<float, float>") body = kernel<float, float>(kind, args);
    if (!body) {
        emu::error = "unknown kernel name";
        return 1;
    }
    return emu::run_grid(body, grid, block);
}
