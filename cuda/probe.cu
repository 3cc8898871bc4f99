// probe.cu: the start-up check that this machine can build and load a kernel at all.
//
// minitorch_amp_probe: x[0] = 1.0 as a float16 (__float2half_rn), so that compiling it needs
// what every kernel of this folder needs: NVRTC and CUDA's own headers (cuda_fp16.h).
//
// Python caller: minitorch_amp/backend/device.py, _probe_cupy, once at import: it compiles
// and loads this file through the loader (kernels.get_function, which launch() uses too)
// before it chooses the GPU; a missing NVRTC, missing headers or a driver too old for the
// code fall back to the CPU with a message saying what to install. The probe does not launch
// it (that would allocate on the device and wait for it at import); the GPU tests do.
// Launch: grid (1,), block (1,). Args: x float16 [1] (written).
// NumPy twin (the specification): x[0] = numpy.float16(1.0).

#include <cuda_fp16.h>

extern "C" __global__ void minitorch_amp_probe(__half* x)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) x[0] = __float2half_rn(1.0f);
}
