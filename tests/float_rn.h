// float_rn.h: the float32 device intrinsics that softmax.cu and cross_entropy.cu use, for
// their CPU emulators: one IEEE operation each, rounded to nearest even (the emulators are
// built with -ffp-contract=off: no fma), and a float's bits reinterpreted.
#pragma once

#include <cstring>

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __int_as_float(int bits)
{
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}
