// double_rn.h: the bit and double-precision device intrinsics that amp.cu and fp8_scale.cu
// (and fp8_cast.cu, which includes it) use, for their CPU emulators. __float_as_uint and
// __double_as_longlong come from cuda_emulator.h, included first.
#pragma once

#include <cmath>
#include <cstring>

inline float __uint_as_float(unsigned int u)
{
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
inline int __double2hiint(double x)  // the high 32 bits: sign, exponent, top of the mantissa
{
    return static_cast<int>(static_cast<unsigned long long>(__double_as_longlong(x)) >> 32);
}
// double -> unsigned int, rounded to nearest even (the default rounding mode)
inline unsigned int __double2uint_rn(double x)
{
    return static_cast<unsigned int>(std::nearbyint(x));
}
