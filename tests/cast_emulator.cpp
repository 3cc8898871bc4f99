// cast_emulator.cpp: run cuda/cast.cu on a CPU, one fiber per CUDA thread.
//
// tests/test_cast_pair.py builds this as a shared library and hands it the launches that
// backend/cast.py (cast, cast_pair) would send to the GPU, around NumPy arrays, so the
// launcher's grids, block split and arguments, the grid-stride loops, the alignment head,
// the 16-byte vectors and the tail are checked without a GPU, against the NumPy twin
// (astype) bit for bit. The kernel file is compiled unchanged; the hardware layer is in
// cuda_emulator.h, and the conversions are cuda_fp16.h's and cuda_bf16.h's own host code
// (integer arithmetic on the bits, round to nearest even, as cvt.rn does on the GPU). A
// kernel runs under -ftz=true's flushes (MXCSR's FTZ and DAZ), as CuPy compiles it; the
// casts do no float arithmetic, so nothing is flushed, here as on the GPU.
//
// Build: g++ -std=c++17 -O1 -shared -fPIC -ffp-contract=off -Wno-attributes
//            -Wno-unknown-pragmas -I<cuda>/include -I<repo>/cuda
//            cast_emulator.cpp -o libcast_emulator.so
// Call:  int launch(const char* name, int grid, int block, void** args)  (0 = ok), with
//        args[i] pointing at the i-th kernel argument, as cuLaunchKernel takes them.

#include "cuda_emulator.h"

#include <cuda_bf16.h>

#include <map>

#include "cast.cu"

using Body = std::function<void()>;

template <typename Src, typename Dst>
using Plain = void (*)(const Src*, Dst*, long long);
template <typename Src, typename Dst>
using Check = void (*)(const Src*, Dst*, long long, bool*);
template <typename Dst>
using Pair = void (*)(const float*, Dst*, long long, const float*, Dst*, long long, int);

template <typename Src, typename Dst, Plain<Src, Dst> kernel>
Body plain(void** a)
{
    return [=] { kernel(arg<const Src*>(a, 0), arg<Dst*>(a, 1), arg<long long>(a, 2)); };
}

template <typename Src, typename Dst, Check<Src, Dst> kernel>
Body check(void** a)
{
    return [=] {
        kernel(arg<const Src*>(a, 0), arg<Dst*>(a, 1), arg<long long>(a, 2), arg<bool*>(a, 3));
    };
}

template <typename Dst, Pair<Dst> kernel>
Body pair(void** a)
{
    return [=] {
        kernel(arg<const float*>(a, 0), arg<Dst*>(a, 1), arg<long long>(a, 2),
               arg<const float*>(a, 3), arg<Dst*>(a, 4), arg<long long>(a, 5), arg<int>(a, 6));
    };
}

// Every kernel name the launcher registers (backend/cast.py's _KERNELS and _PAIR_KERNELS).
const std::map<std::string, Body (*)(void**)>& kernel_table()
{
    using bf16 = __nv_bfloat16;
    static const std::map<std::string, Body (*)(void**)> table = {
        {"cast_f32_to_f16", &plain<float, __half, cast_f32_to_f16>},
        {"cast_f32_to_f16_check", &check<float, __half, cast_f32_to_f16_check>},
        {"cast_f16_to_f32", &plain<__half, float, cast_f16_to_f32>},
        {"cast_f16_to_f32_check", &check<__half, float, cast_f16_to_f32_check>},
        {"cast_f32_to_bf16", &plain<float, bf16, cast_f32_to_bf16>},
        {"cast_f32_to_bf16_check", &check<float, bf16, cast_f32_to_bf16_check>},
        {"cast_bf16_to_f32", &plain<bf16, float, cast_bf16_to_f32>},
        {"cast_bf16_to_f32_check", &check<bf16, float, cast_bf16_to_f32_check>},
        {"cast_pair_f32_to_f16", &pair<__half, cast_pair_f32_to_f16>},
        {"cast_pair_f32_to_bf16", &pair<bf16, cast_pair_f32_to_bf16>},
    };
    return table;
}

extern "C" int launch(const char* name, int grid, int block, void** args)
{
    return launch_from(kernel_table(), name, grid, block, args);
}
